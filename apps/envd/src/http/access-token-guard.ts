import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { EnvdState } from '../state.ts';
import { sendHttpError } from './http-error.ts';

export const UNAUTHORIZED_MESSAGE = 'unauthorized access, please provide a valid access token or method signing if supported';

/** Constant-time string comparison (length leaks only through the early return). */
export function tokensEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Routes that authenticate themselves (token or signature) or need none. */
function isExempt(method: string, path: string): boolean {
  if (path === '/health' || path === '/init') return true;
  return path === '/files' && (method === 'GET' || method === 'POST' || method === 'HEAD');
}

/** Whether a request to a route that needs the token may pass: no token set yet, or `X-Access-Token` matches. */
export function accessTokenAccepted(state: EnvdState, given: string | string[] | undefined): boolean {
  const token = state.accessToken;
  return !token || (typeof given === 'string' && tokensEqual(given, token));
}

/** Every route but the exempt ones needs `X-Access-Token` once `/init` set a token. */
export function installAccessTokenGuard(app: FastifyInstance, state: EnvdState): void {
  app.addHook('onRequest', async (request, reply) => {
    if (!state.accessToken || request.method === 'OPTIONS') return;
    const path = request.url.split('?')[0];
    if (isExempt(request.method, path)) return;
    if (accessTokenAccepted(state, request.headers['x-access-token'])) return;
    sendHttpError(reply, 401, UNAUTHORIZED_MESSAGE);
    return reply;
  });
}
