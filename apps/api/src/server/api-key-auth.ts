import type { FastifyInstance } from 'fastify';
import type { KeyStore } from '../store/key-store.ts';
import type { AdminKey } from '../teams/admin-key.ts';
import type { AuthFailureLimiter } from '../http/auth-failure-limiter.ts';
import { clientAddress } from '../http/client-address.ts';
import { apiKeyOrBearer } from '../http/presented-key.ts';
import { decorateRequestTeam } from '../http/request-team.ts';
import { authOf } from '../http/route-auth.ts';

/** Failed-key limits per client address (auth-failure-limiter.ts); `trustForwardedFor` as in client-address.ts. */
export interface AuthFailureGuard {
  limiter: AuthFailureLimiter;
  trustForwardedFor: boolean;
}

/**
 * Checks every request against the rule its matched route declares (route-auth.ts): `open` routes pass; `admin`
 * routes take the admin key only (a team's key is 401 there, and the admin key is 401 everywhere else); `team`
 * routes take a team's key, whose team becomes the request's (request-team.ts). Keys are looked up at every
 * request: a revoked key is refused from the next request on. An address with too many failed keys (admin or team)
 * gets 429 until its window ends. Each refusal is logged once with the route, the path as sent and, where the key
 * was a team's, its team.
 */
export function installApiKeyAuth(app: FastifyInstance, keys: KeyStore, admin: AdminKey, guard?: AuthFailureGuard): void {
  decorateRequestTeam(app);
  app.addHook('onRequest', async (request, reply) => {
    const { auth, bearer } = authOf(request);
    if (auth === 'open') return;
    const client = clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], guard?.trustForwardedFor ?? false);
    const route = request.is404 ? undefined : request.routeOptions.url;
    const wait = guard?.limiter.retryAfterSeconds(client) ?? 0;
    if (wait > 0) return reply.code(429).header('retry-after', String(wait)).send({ code: 429, message: `Too many failed API key attempts from this address; retry in ${wait} s` });
    const refuse = async (message: string, teamId?: string) => {
      request.log.warn({ client, method: request.method, route, url: request.url, teamId }, `API key refused: ${message}`);
      if (guard?.limiter.recordFailure(client)) request.log.warn({ client, route }, 'too many failed API keys from this address: refusing it until the window ends');
      await reply.code(401).send({ code: 401, message });
      return reply;
    };
    if (auth === 'admin') {
      const presented = apiKeyOrBearer(request.headers);
      if (admin.matches(presented)) return;
      // A team's key here is logged with its team: it is someone trying the operator's routes.
      const holder = presented ? await keys.authenticate(presented) : undefined;
      return refuse(presented ? 'Invalid admin key' : 'Missing admin key: send it in the X-API-Key header', holder?.teamId);
    }
    const key = bearer ? apiKeyOrBearer(request.headers) : request.headers['x-api-key'];
    const holder = typeof key === 'string' && key !== '' ? await keys.authenticate(key) : undefined;
    if (holder) {
      request.teamId = holder.teamId;
      request.apiKeyId = holder.keyId;
      request.log = request.log.child({ teamId: holder.teamId, apiKeyId: holder.keyId });
      return;
    }
    const missing = bearer ? 'Missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>' : 'Missing API key: send it in the X-API-Key header';
    return refuse(typeof key === 'string' && key !== '' ? 'Invalid API key' : missing);
  });
}
