import type { FastifyInstance } from 'fastify';
import type { EnvdContext } from '../context.ts';

// Placeholder: implemented by the control-routes work (/health, /init, /envs, /metrics).
export function registerControlRoutes(app: FastifyInstance, _ctx: EnvdContext): void {
  app.get('/health', async (_req, reply) => reply.code(204).header('cache-control', 'no-store').send());
}
