import { describe, expect, it } from 'vitest';
import { envdCallerOf } from './access-checks.ts';
import type { RoutableSandbox } from './sandbox-directory.ts';

const sandbox = (envdAccessToken: string): RoutableSandbox => ({
  sandboxId: 'sbx1', state: 'running', address: '10.0.0.2', envdAccessToken, trafficAccessToken: null,
  maskRequestHost: undefined, httpsPorts: [], autoResume: false,
});

describe('envdCallerOf', () => {
  const secured = sandbox('tok-1');

  it('tells the owner by a matching X-Access-Token, on any route', () => {
    expect(envdCallerOf(secured, 'POST', '/process.Process/Start', { 'x-access-token': 'tok-1' })).toBe('owner');
    expect(envdCallerOf(secured, 'GET', '/health', { 'x-access-token': 'tok-1' })).toBe('owner');
  });

  it("refuses token-only routes without a valid token with envd's 401", () => {
    for (const headers of [{}, { 'x-access-token': 'tok-2' }, { 'x-access-token': '' }, { 'x-access-token': 'tok-1 ' }]) {
      expect(envdCallerOf(secured, 'POST', '/process.Process/Start', headers)).toMatchObject({ status: 401, reason: 'envd_unauthorized', body: { code: 401 } });
    }
    expect(envdCallerOf(secured, 'GET', '/files/compose', {})).toMatchObject({ status: 401 });
    expect(envdCallerOf(secured, 'GET', '/healthz', {})).toMatchObject({ status: 401 });
  });

  it('lets the routes envd serves without the token through as anonymous, however spelled', () => {
    for (const [method, url] of [['GET', '/health'], ['GET', '//health/'], ['GET', '/files?path=a&signature=v1_x'], ['POST', '/x/../files'], ['HEAD', '/%66iles'], ['OPTIONS', '/process.Process/Start']] as const) {
      expect(envdCallerOf(secured, method, url, {})).toBe('anonymous');
    }
    // A wrong token on an open route is not the owner's.
    expect(envdCallerOf(secured, 'GET', '/health', { 'x-access-token': 'nope' })).toBe('anonymous');
  });

  it('routes everything of a sandbox without a token as anonymous (envd checks nothing there)', () => {
    expect(envdCallerOf(sandbox(''), 'POST', '/process.Process/Start', {})).toBe('anonymous');
    expect(envdCallerOf(sandbox(''), 'POST', '/process.Process/Start', { 'x-access-token': '' })).toBe('anonymous');
  });
});
