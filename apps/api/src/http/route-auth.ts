import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * Who may call a route, declared by the route itself at registration (`config: TEAM_ROUTE` …):
 * - `open`: no API key (the route carries its own proof, or none is needed: health, dashboard files, signed uploads,
 *   volume content with its bearer token);
 * - `team`: a team's API key (`X-API-Key`; also `Authorization: Bearer <key>` where `bearer` is set);
 * - `admin`: the platform's admin key (`X-API-Key` or Bearer), never a team's.
 * The check runs on the route the router matched (api-key-auth.ts), so no spelling of a path — percent-encoded,
 * case-varied, with dot segments or doubled slashes — reaches a route under another route's rule.
 */
export type RouteAuth = 'open' | 'team' | 'admin';

export interface RouteAuthConfig {
  auth: RouteAuth;
  /** With `team`: `Authorization: Bearer <key>` counts as well as `X-API-Key` (the CLI's `/teams`). */
  bearer?: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
    bearer?: boolean;
  }
}

export const OPEN_ROUTE: RouteAuthConfig = { auth: 'open' };
export const TEAM_ROUTE: RouteAuthConfig = { auth: 'team' };
export const ADMIN_ROUTE: RouteAuthConfig = { auth: 'admin' };

const AUTHS: readonly RouteAuth[] = ['open', 'team', 'admin'];

/**
 * Refuses, at registration (so at startup), any route that does not declare who may call it. Installed before the
 * first route; applies to routes of every plugin scope below the server.
 */
export function requireDeclaredAuth(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (auth === undefined || !AUTHS.includes(auth)) {
      throw new Error(`route ${String(route.method)} ${route.url} declares no auth: give it config.auth ('open', 'team' or 'admin', see route-auth.ts)`);
    }
    if (route.config?.bearer && auth !== 'team') throw new Error(`route ${String(route.method)} ${route.url}: 'bearer' goes with auth 'team' only`);
  });
}

/** The rule of the route a request matched; a request no route matched needs a team's key before it learns so (404). */
export function authOf(request: FastifyRequest): RouteAuthConfig {
  if (request.is404) return TEAM_ROUTE;
  const config = request.routeOptions.config;
  return { auth: config.auth ?? 'team', bearer: config.bearer };
}
