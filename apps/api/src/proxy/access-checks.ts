import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { cleanRequestPath } from './control-routes.ts';
import { proxyErrors, TRAFFIC_TOKEN_HEADER, type ProxyErrorReply } from './proxy-errors.ts';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import type { RoutableSandbox } from './sandbox-directory.ts';

/** Constant-time string equality that does not leak the length through an early exit. */
export function tokensEqual(provided: string, expected: string): boolean {
  const a = createHash('sha256').update(provided).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b) && provided.length === expected.length;
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Private sandboxes need `e2b-traffic-access-token` on every port but envd's (envd checks its own token). */
export function checkTrafficToken(
  sandbox: RoutableSandbox,
  port: number,
  headers: IncomingHttpHeaders,
): ProxyErrorReply | undefined {
  if (port === ENVD_PORT || sandbox.trafficAccessToken === null) return undefined;
  const provided = headerValue(headers, TRAFFIC_TOKEN_HEADER);
  if (provided === undefined) return proxyErrors.trafficTokenMissing(sandbox.sandboxId);
  if (!tokensEqual(provided, sandbox.trafficAccessToken)) return proxyErrors.trafficTokenInvalid(sandbox.sandboxId);
  return undefined;
}

/**
 * Whether traffic may wake a paused private sandbox: it must carry the traffic token (other ports) or envd's
 * `X-Access-Token` (envd port). Public sandboxes resume for anyone.
 */
export function mayAutoResume(sandbox: RoutableSandbox, port: number, headers: IncomingHttpHeaders): boolean {
  if (sandbox.trafficAccessToken === null) return true;
  if (port === ENVD_PORT) {
    const token = headerValue(headers, 'x-access-token');
    return token !== undefined && tokensEqual(token, sandbox.envdAccessToken);
  }
  const token = headerValue(headers, TRAFFIC_TOKEN_HEADER);
  return token !== undefined && tokensEqual(token, sandbox.trafficAccessToken);
}

/**
 * Who an envd request comes from, as far as the edge can tell: `owner` carries the sandbox's `X-Access-Token`;
 * `anonymous` is anyone else on a route envd serves without it.
 */
export type EnvdCaller = 'owner' | 'anonymous';

/**
 * envd routes that answer without `X-Access-Token` (wire §4.4): `/health`, and `/files`, which checks a signed
 * URL's signature itself; CORS preflights pass envd's guard too. Matched on the cleaned path, so a spelling envd
 * would not treat as exempt only ends up forwarded anonymously (and refused by envd), never refused here wrongly.
 */
function envdServesAnonymous(method: string | undefined, url: string): boolean {
  if (method === 'OPTIONS') return true;
  const path = cleanRequestPath(url).toLowerCase();
  return path === '/health' || path === '/files';
}

/**
 * Classifies a request for envd's port, or refuses it with envd's own 401 when it needs the token and carries no
 * valid one: such requests never reach envd, so they take no connection slot. A sandbox without a token (none is
 * issued today: `secure` is ignored and every sandbox gets one) has no owner to tell apart, so envd checks nothing
 * and all of its traffic is anonymous.
 */
export function envdCallerOf(
  sandbox: RoutableSandbox,
  method: string | undefined,
  url: string,
  headers: IncomingHttpHeaders,
): EnvdCaller | ProxyErrorReply {
  if (sandbox.envdAccessToken === '') return 'anonymous';
  const token = headerValue(headers, 'x-access-token');
  if (token !== undefined && tokensEqual(token, sandbox.envdAccessToken)) return 'owner';
  return envdServesAnonymous(method, url) ? 'anonymous' : proxyErrors.envdUnauthorized();
}
