import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.ts';
import { apiKeyOrBearer as metricsApiKey } from '../http/presented-key.ts';
import { LISTEN_ADDRESS_PATTERN, parseListenAddress } from './metrics-route.ts';

describe('metrics listen address', () => {
  const valid = (address: string): boolean => new RegExp(LISTEN_ADDRESS_PATTERN).test(address);

  it('accepts host:port with a name, IPv4 or bracketed IPv6, and empty (off)', () => {
    for (const address of ['', '127.0.0.1:9464', '0.0.0.0:0', 'localhost:65535', '[::1]:9464', '[::]:80', 'metrics.internal:9464']) {
      expect(valid(address), address).toBe(true);
    }
  });

  it('refuses ports out of range, missing parts and URLs', () => {
    for (const address of ['9464', ':9464', '127.0.0.1', '127.0.0.1:65536', '127.0.0.1:99999', 'http://127.0.0.1:9464', '::1:9464', '127.0.0.1:9464/metrics', 'a b:1', '-x:1']) {
      expect(valid(address), address).toBe(false);
    }
  });

  it('is a setting checked at startup: off by default, a bad value names the variable', () => {
    expect(loadConfig({}).metricsAddress).toBe('');
    expect(loadConfig({ TIDEPOOL_METRICS_ADDRESS: ' 127.0.0.1:9464 ' }).metricsAddress).toBe('127.0.0.1:9464');
    expect(() => loadConfig({ TIDEPOOL_METRICS_ADDRESS: '127.0.0.1:70000' })).toThrow(ConfigError);
    expect(() => loadConfig({ TIDEPOOL_METRICS_ADDRESS: '9464' })).toThrow(/TIDEPOOL_METRICS_ADDRESS/);
  });

  it('splits host and port', () => {
    expect(parseListenAddress('127.0.0.1:9464')).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(parseListenAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
  });
});

describe('metricsApiKey', () => {
  it('takes X-API-Key first, else a Bearer token', () => {
    expect(metricsApiKey({ 'x-api-key': 'e2b_a', authorization: 'Bearer e2b_b' })).toBe('e2b_a');
    expect(metricsApiKey({ authorization: 'Bearer e2b_b' })).toBe('e2b_b');
    expect(metricsApiKey({ authorization: 'bearer   e2b_c ' })).toBe('e2b_c');
  });

  it('ignores other schemes, empty keys and malformed headers', () => {
    expect(metricsApiKey({})).toBeUndefined();
    expect(metricsApiKey({ 'x-api-key': '' })).toBeUndefined();
    expect(metricsApiKey({ authorization: 'Basic ZTJiX2E6' })).toBeUndefined();
    expect(metricsApiKey({ authorization: 'Bearer' })).toBeUndefined();
    expect(metricsApiKey({ authorization: 'Bearer a b' })).toBeUndefined();
  });
});
