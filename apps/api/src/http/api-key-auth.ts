import type { FastifyInstance } from 'fastify';
import { isDashboardRequest } from '../dashboard/dashboard-assets.ts';
import { METRICS_PATH } from '../observability/metrics-route.ts';
import { TEAMS_PATH } from '../teams/team-routes.ts';
import type { KeyStore } from '../store/key-store.ts';
import type { AdminKey } from '../teams/admin-key.ts';
import { ADMIN_PREFIX } from '../teams/admin-routes.ts';
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

/**
 * `X-API-Key` on every platform route but the open ones; the key's team becomes the request's (request-team.ts).
 * `/admin/*` takes the admin key only (a team's key is 401 there, and the admin key is 401 everywhere else).
 * Keys are looked up at every request: a revoked key is refused from the next request on.
 */
export function installApiKeyAuth(app: FastifyInstance, keys: KeyStore, admin: AdminKey): void {
  decorateRequestTeam(app);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0]!;
    if (isOpenRoute(request.method, path)) return;
    if (path === ADMIN_PREFIX || path.startsWith(`${ADMIN_PREFIX}/`)) {
      const presented = apiKeyOrBearer(request.headers);
      if (admin.matches(presented)) return;
      await reply.code(401).send({ code: 401, message: presented ? 'Invalid admin key' : 'Missing admin key: send it in the X-API-Key header' });
      return reply;
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
    const message = typeof key === 'string' && key !== '' ? 'Invalid API key' : missing;
    await reply.code(401).send({ code: 401, message });
    return reply;
  });
}
