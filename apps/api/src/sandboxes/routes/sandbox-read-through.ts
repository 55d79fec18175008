import type { FastifyInstance } from 'fastify';
import { normalizeSandboxId } from '../sandbox-identity.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';

/**
 * With API replicas on one database, a route naming a sandbox (`:sandboxID`) first makes sure this replica's cache
 * holds it when the store does (it may have been made through another replica a moment ago); the routes then read
 * the cache as always. After authentication and schema checks, so only valid ids from valid keys reach the store.
 * A no-op alone on SQLite.
 */
export function installSandboxReadThrough(app: FastifyInstance, registry: Pick<SandboxRegistry, 'isShared' | 'ensure'>): void {
  if (!registry.isShared) return;
  app.addHook('preHandler', async (request) => {
    const raw = (request.params as { sandboxID?: unknown } | undefined)?.sandboxID;
    if (typeof raw === 'string' && raw.length > 0) await registry.ensure(normalizeSandboxId(raw));
  });
}
