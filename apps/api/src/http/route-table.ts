import type { FastifyInstance } from 'fastify';
import type { RouteAuth } from './route-auth.ts';

/** One route as registered: its method, URL pattern (`/sandboxes/:sandboxID`) and who may call it. */
export interface RouteEntry {
  method: string;
  url: string;
  auth: RouteAuth | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered on this server, in registration order (HEAD twins of GET routes left out). */
    routeTable: readonly RouteEntry[];
  }
}

/**
 * Records the routes registered from now on into `app.routeTable`. Installed before any route: the teams isolation
 * and route-auth tests walk this table so that a route added without a case fails them.
 */
export function recordRouteTable(app: FastifyInstance): void {
  const entries: RouteEntry[] = [];
  app.decorate('routeTable', entries);
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      if (method === 'HEAD') continue;
      entries.push({ method, url: route.url, auth: route.config?.auth });
    }
  });
}
