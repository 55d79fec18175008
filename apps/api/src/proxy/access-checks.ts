import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { proxyErrors, TRAFFIC_TOKEN_HEADER, type ProxyErrorReply } from './proxy-errors.ts';
import { ENVD_PORT, type RoutableSandbox } from './sandbox-directory.ts';

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
