import type { FastifyInstance } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { registerInitRoute } from './init-route.ts';
import { ResourceMonitor } from './resource-usage.ts';

/** `/health`, `/init`, `/envs` and `/metrics`. */
export function registerControlRoutes(app: FastifyInstance, ctx: EnvdContext): void {
  const monitor = new ResourceMonitor();
  app.get('/health', async (_request, reply) => reply.code(204).header('cache-control', 'no-store').send());
  registerInitRoute(app, ctx);
  app.get('/envs', async () => ctx.state.globalEnv());
  app.get('/metrics', async (_request, reply) => reply.header('cache-control', 'no-store').send(await monitor.sample()));
}
