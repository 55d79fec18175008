import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** What a caller's `x-request-id` may be to be kept: short, printable, no spaces or quotes (it is echoed and logged). */
const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** The request's id: the caller's `x-request-id` when it is well formed, else a new UUID (a malformed one is never echoed). */
export function requestIdOf(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * One access-log line per REST request when its answer is sent (method, matched route, status, duration, team and
 * the request id, which every line of the request's log carries as `reqId`), and the id echoed as `x-request-id`.
 * Sandbox traffic never reaches these hooks (the sandbox proxy takes it before the router).
 */
export function installRequestLog(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    return payload;
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      {
        method: request.method,
        route: request.is404 ? undefined : request.routeOptions.url,
        url: request.is404 ? request.url.slice(0, 200) : undefined,
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 10) / 10,
        teamId: request.teamId || undefined,
      },
      'request completed',
    );
  });
}
