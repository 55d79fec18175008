import { describe, expect, it } from 'vitest';
import { cleanRequestPath, isEnvdControlRoute } from './control-routes.ts';

describe('cleanRequestPath', () => {
  it('decodes and cleans like path.Clean', () => {
    expect(cleanRequestPath('/files?path=/init')).toBe('/files');
    expect(cleanRequestPath('//init/')).toBe('/init');
    expect(cleanRequestPath('/a/../init')).toBe('/init');
    expect(cleanRequestPath('/./%69nit')).toBe('/init');
    expect(cleanRequestPath('http://x/init?y')).toBe('/init');
    expect(cleanRequestPath('')).toBe('/');
    expect(cleanRequestPath('/%zz')).toBe('/%zz');
  });
});

describe('isEnvdControlRoute', () => {
  it('flags every control route in any spelling', () => {
    for (const route of ['/init', '/freeze', '/unfreeze', '/collapse', '/fsfreeze', '/fsthaw', '/upgrade']) {
      expect(isEnvdControlRoute(route)).toBe(true);
      expect(isEnvdControlRoute(`${route}/`)).toBe(true);
      expect(isEnvdControlRoute(`/x/..${route}?a=b`)).toBe(true);
    }
    expect(isEnvdControlRoute('/INIT')).toBe(true);
  });
  it('leaves ordinary envd routes alone', () => {
    for (const route of ['/health', '/files?path=/init', '/process.Process/Start', '/init/x', '/metrics', '/envs']) {
      expect(isEnvdControlRoute(route)).toBe(false);
    }
  });
});
