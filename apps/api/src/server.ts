import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { installApiKeyAuth } from './auth.ts';
import { installApiErrorHandler } from './errors.ts';
import { installSandboxProxy } from './proxy/sandbox-proxy.ts';
import { registerSandboxLifecycleRoutes } from './routes/sandbox-lifecycle-routes.ts';
import { registerSandboxObservabilityRoutes } from './routes/sandbox-observability-routes.ts';
import { registerSandboxRoutes } from './routes/sandbox-routes.ts';
import type { TimeoutRules } from './routes/timeout-rules.ts';
import type { SandboxLifecycle } from './sandboxes/sandbox-lifecycle.ts';
import type { KeyStore } from './store/key-store.ts';
import type { SandboxStore } from './store/sandbox-store.ts';

export interface ApiServerDeps {
  lifecycle: SandboxLifecycle;
  keys: KeyStore;
  sandboxes: SandboxStore;
  domain: string;
  timeouts: TimeoutRules;
  logger: Logger;
}

/** The platform's one HTTP listener: sandbox proxy first, then the authenticated REST API. */
export function buildApiServer(deps: ApiServerDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: 620_000,
    requestTimeout: 0,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  installSandboxProxy(app, { directory: deps.lifecycle, domain: deps.domain, logger: deps.logger });
  installApiErrorHandler(app);
  // The SDK sends `{}`, a JSON body, or nothing at all with a JSON content type: all mean "no options".
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body).trim();
    if (text === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new Error('request body is not valid JSON'), { statusCode: 400 }), undefined);
    }
  });
  app.addHook('preValidation', async (request) => {
    if (request.method !== 'GET' && request.method !== 'DELETE' && request.body === undefined) request.body = {};
  });
  app.get('/health', async (_request, reply) => reply.code(200).type('text/plain').send('Health check successful'));
  installApiKeyAuth(app, deps.keys);
  registerSandboxRoutes(app, deps.lifecycle, deps.timeouts);
  registerSandboxLifecycleRoutes(app, deps.lifecycle, deps.timeouts);
  registerSandboxObservabilityRoutes(app, deps.lifecycle, (id) => deps.sandboxes.events(id));
  return app;
}
