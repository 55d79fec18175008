import type { FastifyInstance } from 'fastify';
import { isDashboardRequest } from '../dashboard/dashboard-assets.ts';
import { METRICS_PATH } from '../observability/metrics-route.ts';
import { TEAMS_PATH } from '../teams/team-routes.ts';
import type { KeyStore } from '../store/key-store.ts';
import type { AdminKey } from '../teams/admin-key.ts';
import { ADMIN_PREFIX } from '../teams/admin-routes.ts';
import type { AuthFailureLimiter } from './auth-failure-limiter.ts';
import { clientAddress } from './client-address.ts';
import { apiKeyOrBearer } from './presented-key.ts';
import { decorateRequestTeam } from './request-team.ts';
import { VOLUME_CONTENT_PREFIX } from '../volumes/content/volume-content-routes.ts';

/**
 * Routes that carry their own proof instead of an API key: health, the dashboard's static files, signed template uploads, and the
 * volume-content API (a volume's bearer token, checked by its routes; the SDK sends no API key there).
 */
function isOpenRoute(method: string, path: string): boolean {
  if (method === 'GET' && path === '/health') return true;
  if (isDashboardRequest(method, path)) return true;
  if (path.startsWith(VOLUME_CONTENT_PREFIX)) return true;
  return method === 'PUT' && /^\/templates\/[^/]+\/files\/[0-9a-f]{64}\/upload$/.test(path);
}

/**
 * Routes where `Authorization: Bearer <key>` counts as well as `X-API-Key`: Prometheus scrapes of /metrics, and the
 * CLI's /teams (its access-token route in the reference; here an access token is one of the platform's API keys).
 */
const BEARER_PATHS = new Set([METRICS_PATH, TEAMS_PATH]);

/** Routes of the platform's operator, not of a team: the admin key only (`/nodes` is admin in the reference too). */
const ADMIN_ONLY = [ADMIN_PREFIX, '/nodes'];

/** Failed-key limits per client address (auth-failure-limiter.ts); `trustForwardedFor` as in client-address.ts. */
export interface AuthFailureGuard {
  limiter: AuthFailureLimiter;
  trustForwardedFor: boolean;
}

/**
 * `X-API-Key` on every platform route but the open ones; the key's team becomes the request's (request-team.ts).
 * `/admin/*` and `/nodes*` take the admin key only (a team's key is 401 there, and the admin key is 401 everywhere else).
 * Keys are looked up at every request: a revoked key is refused from the next request on. An address with too
 * many failed keys (admin or team) gets 429 until its window ends.
 */
export function installApiKeyAuth(app: FastifyInstance, keys: KeyStore, admin: AdminKey, guard?: AuthFailureGuard): void {
  decorateRequestTeam(app);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0]!;
    if (isOpenRoute(request.method, path)) return;
    const client = clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], guard?.trustForwardedFor ?? false);
    const wait = guard?.limiter.retryAfterSeconds(client) ?? 0;
    if (wait > 0) return reply.code(429).header('retry-after', String(wait)).send({ code: 429, message: `Too many failed API key attempts from this address; retry in ${wait} s` });
    const refuse = async (message: string) => {
      if (guard?.limiter.recordFailure(client)) request.log.warn({ client, path }, 'too many failed API keys from this address: refusing it until the window ends');
      await reply.code(401).send({ code: 401, message });
      return reply;
    };
    if (ADMIN_ONLY.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))) {
      const presented = apiKeyOrBearer(request.headers);
      if (admin.matches(presented)) return;
      return refuse(presented ? 'Invalid admin key' : 'Missing admin key: send it in the X-API-Key header');
    }
    const bearerAllowed = BEARER_PATHS.has(path);
    const key = bearerAllowed ? apiKeyOrBearer(request.headers) : request.headers['x-api-key'];
    const holder = typeof key === 'string' && key !== '' ? await keys.authenticate(key) : undefined;
    if (holder) {
      request.teamId = holder.teamId;
      request.apiKeyId = holder.keyId;
      request.log = request.log.child({ teamId: holder.teamId, apiKeyId: holder.keyId });
      return;
    }
    const missing = bearerAllowed ? 'Missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>' : 'Missing API key: send it in the X-API-Key header';
    return refuse(typeof key === 'string' && key !== '' ? 'Invalid API key' : missing);
  });
}
