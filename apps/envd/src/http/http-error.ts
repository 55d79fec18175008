import type { FastifyInstance } from 'fastify';

/** The one error type of envd's plain-HTTP routes; answered as `{code, message}` with its status. */
export class EnvdHttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export function sendHttpError(reply: { code(n: number): unknown; header(k: string, v: string): unknown; send(b: unknown): unknown }, status: number, message: string): void {
  reply.code(status);
  reply.header('content-type', 'application/json; charset=utf-8');
  reply.send({ code: status, message });
}

/** Installs the error handler that turns every failure of a plain-HTTP route into `{code, message}`. */
export function installHttpErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: Error & { statusCode?: number }, request, reply) => {
    if (error instanceof EnvdHttpError) return sendHttpError(reply, error.status, error.message);
    const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    sendHttpError(reply, status, error.message);
  });
  app.setNotFoundHandler((request, reply) => sendHttpError(reply, 404, `route ${request.method} ${request.url.split('?')[0]} not found`));
}
