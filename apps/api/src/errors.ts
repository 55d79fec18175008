import type { FastifyInstance } from 'fastify';

/** The one error type of the platform API; answered as `{code, message}` with its status. */
export class ApiError extends Error {
  constructor(readonly statusCode: number, message: string) {
    super(message);
  }
}

export const sandboxNotFound = (id: string): ApiError => new ApiError(404, `Sandbox "${id}" doesn't exist or you don't have access to it`);

/** Classifies every failure of a platform route into `{code, message}` in one place. */
export function installApiErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown }, request, reply) => {
    let status = 500;
    let message = error.message;
    if (error instanceof ApiError) status = error.statusCode;
    else if (error.validation) {
      status = 400;
      message = `invalid request: ${error.message}`;
    } else if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) status = error.statusCode;
    if (status >= 500) request.log.error({ err: error }, 'request failed');
    void reply.code(status).header('content-type', 'application/json; charset=utf-8').send({ code: status, message });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ code: 404, message: `route ${request.method} ${request.url.split('?')[0]} not found` });
  });
}
