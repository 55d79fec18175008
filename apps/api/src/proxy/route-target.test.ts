import { describe, expect, it } from 'vitest';
import {
  hostnameOf,
  isSignedFilesRequest,
  parseRoutingHeaders,
  parseSandboxHost,
  resolveRouteTarget,
} from './route-target.ts';

const DOMAIN = 'tidepool.local';

describe('hostnameOf', () => {
  it('drops the port and lower-cases', () => {
    expect(hostnameOf('49983-ABC.Tidepool.Local:3000')).toBe('49983-abc.tidepool.local');
    expect(hostnameOf('[::1]:3000')).toBe('[::1]');
    expect(hostnameOf('example.com.')).toBe('example.com');
    expect(hostnameOf(undefined)).toBe('');
  });
});

describe('parseSandboxHost', () => {
  it('parses <port>-<id>.<domain>, with or without a port and extra label parts', () => {
    expect(parseSandboxHost('49983-isbx123.tidepool.local', DOMAIN)).toEqual({
      kind: 'sandbox', sandboxId: 'isbx123', port: 49983, via: 'host',
    });
    expect(parseSandboxHost('8000-abc.tidepool.local:3000', DOMAIN)).toMatchObject({ sandboxId: 'abc', port: 8000 });
    expect(parseSandboxHost('8000-abc-legacyclient.tidepool.local', DOMAIN)).toMatchObject({ sandboxId: 'abc', port: 8000 });
  });
  it('leaves hosts that are not sandbox hosts to the API', () => {
    expect(parseSandboxHost('127.0.0.1:3000', DOMAIN)).toBeUndefined();
    expect(parseSandboxHost('api.tidepool.local', DOMAIN)).toBeUndefined();
    expect(parseSandboxHost('tidepool.local', DOMAIN)).toBeUndefined();
    expect(parseSandboxHost('49983-abc.other.domain', DOMAIN)).toBeUndefined();
    expect(parseSandboxHost(undefined, DOMAIN)).toBeUndefined();
  });
  it('rejects a bad port or a bad id', () => {
    expect(parseSandboxHost('abc-isbx.tidepool.local', DOMAIN)).toEqual({ kind: 'invalid', message: 'Invalid sandbox port' });
    expect(parseSandboxHost('70000-isbx.tidepool.local', DOMAIN)).toEqual({ kind: 'invalid', message: 'Invalid sandbox port' });
    expect(parseSandboxHost('0-isbx.tidepool.local', DOMAIN)).toEqual({ kind: 'invalid', message: 'Invalid sandbox port' });
    expect(parseSandboxHost('8000-.tidepool.local', DOMAIN)).toEqual({ kind: 'invalid', message: 'Invalid sandbox ID' });
  });
});

describe('parseRoutingHeaders', () => {
  it('routes on both headers', () => {
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': 'abc', 'e2b-sandbox-port': '49983' })).toEqual({
      kind: 'sandbox', sandboxId: 'abc', port: 49983, via: 'headers',
    });
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': 'debug_sandbox_id', 'e2b-sandbox-port': '49999' })).toMatchObject({
      sandboxId: 'debug_sandbox_id', port: 49999,
    });
  });
  it('is undefined without either header', () => {
    expect(parseRoutingHeaders({ host: '127.0.0.1' })).toBeUndefined();
  });
  it('answers missing header when only one is present', () => {
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': 'abc' })).toEqual({ kind: 'invalid', message: 'missing header' });
    expect(parseRoutingHeaders({ 'e2b-sandbox-port': '49983' })).toEqual({ kind: 'invalid', message: 'missing header' });
  });
  it('rejects bad values', () => {
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': 'abc', 'e2b-sandbox-port': 'x' })).toEqual({ kind: 'invalid', message: 'Invalid sandbox port' });
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': 'a/b', 'e2b-sandbox-port': '1' })).toEqual({ kind: 'invalid', message: 'Invalid sandbox ID' });
    expect(parseRoutingHeaders({ 'e2b-sandbox-id': '', 'e2b-sandbox-port': '1' })).toEqual({ kind: 'invalid', message: 'Invalid sandbox ID' });
  });
});

describe('isSignedFilesRequest', () => {
  it('matches /files with a signature for GET/POST/HEAD only', () => {
    expect(isSignedFilesRequest('GET', '/files?path=%2Fa&signature=v1_x')).toBe(true);
    expect(isSignedFilesRequest('POST', '/files?signature=v1_x')).toBe(true);
    expect(isSignedFilesRequest('PUT', '/files?signature=v1_x')).toBe(false);
    expect(isSignedFilesRequest('GET', '/files?path=%2Fa')).toBe(false);
    expect(isSignedFilesRequest('GET', '/files/x?signature=v1_x')).toBe(false);
    expect(isSignedFilesRequest('GET', '/files?nosignature=1')).toBe(false);
  });
});

describe('resolveRouteTarget', () => {
  it('prefers a sandbox host, then headers, then the signed-URL lookup, else the API', () => {
    expect(resolveRouteTarget('GET', '/health', { host: '8000-abc.tidepool.local', 'e2b-sandbox-id': 'zzz', 'e2b-sandbox-port': '49983' }, DOMAIN))
      .toMatchObject({ sandboxId: 'abc', port: 8000, via: 'host' });
    expect(resolveRouteTarget('GET', '/health', { host: '127.0.0.1:3000', 'e2b-sandbox-id': 'abc', 'e2b-sandbox-port': '49983' }, DOMAIN))
      .toMatchObject({ sandboxId: 'abc', port: 49983, via: 'headers' });
    expect(resolveRouteTarget('GET', '/files?path=a&signature=v1_x', { host: '127.0.0.1:3000' }, DOMAIN)).toEqual({ kind: 'signed-files' });
    expect(resolveRouteTarget('GET', '/health', { host: '127.0.0.1:3000' }, DOMAIN)).toEqual({ kind: 'api' });
    expect(resolveRouteTarget('POST', '/v2/sandboxes', { host: 'api.tidepool.local' }, DOMAIN)).toEqual({ kind: 'api' });
  });
});
