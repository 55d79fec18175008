import type { FastifyInstance, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The team of the API key this request authenticated with ('' before authentication, and on open routes). */
    teamId: string;
    /** The id of that key (logs). */
    apiKeyId: string;
  }
}

/** Gives every request the (empty) team fields the API key hook fills in. */
export function decorateRequestTeam(app: FastifyInstance): void {
  app.decorateRequest('teamId', '');
  app.decorateRequest('apiKeyId', '');
}

/**
 * The caller's team. Every team-scoped route reads it from here; a route reached without an authenticated key is
 * a wiring mistake, refused rather than answered with nobody's (or everybody's) resources.
 */
export function callerTeam(request: FastifyRequest): string {
  if (request.teamId === '') throw new Error(`route ${request.method} ${request.routeOptions.url} ran without an authenticated team`);
  return request.teamId;
}
