import type { FastifyInstance } from 'fastify';

/** One route as registered: its method and URL pattern (`/sandboxes/:sandboxID`). */
export interface RouteEntry {
  method: string;
  url: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered on this server, in registration order (HEAD twins of GET routes left out). */
    routeTable: readonly RouteEntry[];
  }
}

/**
 * Records the routes registered from now on into `app.routeTable`. Installed before any route: the teams isolation
 * test walks this table so that a route added without an isolation case fails it.
 */
export function recordRouteTable(app: FastifyInstance): void {
  const entries: RouteEntry[] = [];
  app.decorate('routeTable', entries);
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      if (method === 'HEAD') continue;
      entries.push({ method, url: route.url });
    }
  });
}
