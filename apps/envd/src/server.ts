import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { EnvdContext } from './context.ts';
import { registerFilesystemService } from './filesystem/filesystem-service.ts';
import { installAccessTokenGuard } from './http/access-token-guard.ts';
import { registerControlRoutes } from './http/control-routes.ts';
import { registerFileRoutes } from './http/files-routes.ts';
import { installHttpErrorHandler } from './http/http-error.ts';
import { registerProcessService } from './process/process-service.ts';

/** Builds the envd HTTP server: Connect services for process and filesystem plus the plain-HTTP routes. */
export async function buildEnvdServer(ctx: EnvdContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: 640_000,
    requestTimeout: 0,
    bodyLimit: 16 * 1024 * 1024,
    return503OnClosing: false,
  });
  installHttpErrorHandler(app);
  installAccessTokenGuard(app, ctx.state);
  await app.register(fastifyConnectPlugin, {
    routes(router) {
      registerProcessService(router, ctx);
      registerFilesystemService(router, ctx);
    },
  });
  await app.register(async (scope) => registerControlRoutes(scope, ctx));
  await app.register(async (scope) => registerFileRoutes(scope, ctx));
  return app;
}
