import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import { reclassifyClientFaults } from './connect/client-fault-errors.ts';
import type { EnvdContext } from './context.ts';
import { registerFilesystemService } from './filesystem/filesystem-service.ts';
import { WatchBarrier } from './filesystem/watch-barrier.ts';
import { accessTokenAccepted, installAccessTokenGuard } from './http/access-token-guard.ts';
import { registerControlRoutes } from './http/control-routes.ts';
import { registerFileRoutes } from './http/files-routes.ts';
import { installHttpErrorHandler } from './http/http-error.ts';
import type { ProcessRegistry } from './process/process-registry.ts';
import { registerProcessService } from './process/process-service.ts';
import { servesStart, serveStart } from './process/start-fast-path.ts';

function noSchemaCompiler(): () => never {
  return () => {
    throw new Error('envd routes declare no JSON schemas (server.ts leaves ajv and fast-json-stringify out)');
  };
}

/** Requests node's parser refuses (oversized headers, malformed lines) get envd's `{code, message}` too. */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const body = JSON.stringify({ code: status, message: status === 431 ? 'request header fields too large' : `bad request: ${error.message}` });
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/**
 * Builds the envd HTTP server: Connect services for process and filesystem plus the plain-HTTP routes.
 * `Start` calls the SDK sends take start-fast-path.ts (`ENVD_START_FAST_PATH=false`: all through Connect).
 */
export async function buildEnvdServer(ctx: EnvdContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: 640_000,
    requestTimeout: 0,
    bodyLimit: 16 * 1024 * 1024,
    return503OnClosing: false,
    clientErrorHandler: answerClientError,
    // No route of envd declares a JSON schema: without these, fastify loads ajv and fast-json-stringify at
    // startup (~20 ms of envd's start) for nothing. A schema added later fails loudly instead of silently.
    schemaController: { compilersFactory: { buildValidator: noSchemaCompiler, buildSerializer: noSchemaCompiler } },
  });
  installHttpErrorHandler(app);
  installAccessTokenGuard(app, ctx.state);
  let processes: ProcessRegistry | undefined;
  // Writes and polling reads wait for the events of completed changes to reach every directory watch.
  const watches = new WatchBarrier((message, err) => ctx.logger.warn({ err }, message));
  await app.register(fastifyConnectPlugin, {
    routes(router) {
      processes = registerProcessService(router, ctx);
      registerFilesystemService(router, ctx, watches);
      reclassifyClientFaults(router.handlers);
    },
  });
  await app.register(async (scope) => registerControlRoutes(scope, ctx));
  await app.register(async (scope) => registerFileRoutes(scope, ctx, watches));
  if (ctx.config.startFastPath && processes) serveStartBeforeFastify(app, ctx, processes);
  return app;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Every `commands.run()` is one Start call: those start-fast-path.ts answers exactly as Connect does are taken from
 * the server's `request` event before Fastify routes them (no request/reply objects, no hook chain), once their
 * `X-Access-Token` passes the same check as the token guard. A call the token guard would refuse, and everything
 * else, goes on to Fastify.
 */
function serveStartBeforeFastify(app: FastifyInstance, ctx: EnvdContext, processes: ProcessRegistry): void {
  const server = app.server;
  const fastifyListeners = server.listeners('request') as RequestListener[];
  if (fastifyListeners.length === 0) throw new Error('envd: the Fastify server has no request listener to put the Start fast path in front of');
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (servesStart(req) && accessTokenAccepted(ctx.state, req.headers['x-access-token'])) {
      void serveStart(req, res, ctx, processes);
      return;
    }
    for (const listener of fastifyListeners) listener.call(server, req, res);
  });
}
