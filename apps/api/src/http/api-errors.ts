import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { type FailureKind, PlatformError } from '../errors.ts';
import { isUniqueViolation } from '../store/sql.ts';

const STATUS: Record<FailureKind, number> = {
  invalid: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  limit: 429,
  busy: 503,
  internal: 500,
};

/**
 * `Retry-After` (whole seconds) of capacity refusals. The SDK retries a 429 by itself when this header is
 * an integer (up to its `retries`, within its request timeout), and surfaces `RateLimitError` after;
 * a 503 becomes `ServiceBusyError` (nothing changed, retry).
 */
const DEFAULT_RETRY_AFTER_SECONDS: Partial<Record<FailureKind, number>> = { limit: 1, busy: 5 };

/** The `Retry-After` value of an error, when it is a capacity refusal. */
export function retryAfterOf(error: Error): number | undefined {
  if (!(error instanceof PlatformError)) return undefined;
  const fallback = DEFAULT_RETRY_AFTER_SECONDS[error.kind];
  if (fallback === undefined) return undefined;
  const seconds = error.retryAfterSeconds ?? fallback;
  return Number.isFinite(seconds) ? Math.max(0, Math.ceil(seconds)) : fallback;
}

/** HTTP status of any error thrown while serving a platform route. */
export function statusOf(error: Error & { statusCode?: number; validation?: unknown }): number {
  if (error instanceof PlatformError) return STATUS[error.kind];
  // Two requests (or replicas) creating the same unique name at once: the database refused the second.
  if (isUniqueViolation(error)) return 409;
  if (error.validation) return 400;
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) return error.statusCode;
  return 500;
}

/**
 * Failures fastify answers before any route runs (a URL that does not decode, a path parameter longer
 * than `maxParamLength`): the same `{code, message}` shape, always 400.
 */
export function answerFrameworkError(error: Error, _request: unknown, reply: FastifyReply): void {
  void reply.code(400).header('content-type', 'application/json; charset=utf-8').send({ code: 400, message: error.message });
}

/**
 * Requests Node's HTTP parser refuses before fastify sees them (headers or URL over 16 KiB, garbage on the
 * wire, a client too slow to send its request): the same `{code, message}` shape, then the connection closes.
 */
export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'request headers (URL included) exceed the allowed size']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request not received in time']
        : [400, 'malformed HTTP request'];
  const body = JSON.stringify({ code: status, message });
  const head = [`HTTP/1.1 ${status} ${STATUS_CODES[status]}`, 'Content-Type: application/json; charset=utf-8', `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
}

/** Classifies every failure of a platform route into `{code, message}` in one place. */
export function installApiErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: Error & { statusCode?: number; validation?: unknown }, request, reply) => {
    const status = statusOf(error);
    const message = error.validation
      ? `invalid request: ${error.message}`
      : isUniqueViolation(error)
        ? 'a concurrent request created the same thing meanwhile; try again'
        : error.message;
    const retryAfter = retryAfterOf(error);
    if (retryAfter !== undefined) {
      void reply.header('retry-after', String(retryAfter));
      request.log.info({ status, retryAfter, route: request.routeOptions.url, reason: error.message }, 'refused for capacity');
    } else if (status >= 500) request.log.error({ err: error }, 'request failed');
    void reply.code(status).header('content-type', 'application/json; charset=utf-8').send({ code: status, message });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ code: 404, message: `route ${request.method} ${request.url.split('?')[0]} not found` });
  });
}
