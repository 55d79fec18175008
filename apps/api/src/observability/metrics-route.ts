import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { listenerOrigin, listenOn } from '../http/listen.ts';
import { ADMIN_ROUTE } from '../http/route-auth.ts';

export const METRICS_PATH = '/metrics';

/** `host:port` (host a name, IPv4 or `[IPv6]`; port 0–65535, 0 = any free port); '' = no separate listener. */
export const LISTEN_ADDRESS_PATTERN =
  '^$|^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})$';

/** Splits a validated `host:port`; `[::1]:9464` gives host `::1`. */
export function parseListenAddress(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port: Number(address.slice(colon + 1)) };
}

export interface MetricsExposition {
  exposition(): Promise<{ contentType: string; body: string }>;
}

/**
 * `GET /metrics` on the API listener, with the admin key (X-API-Key or Bearer): it is the whole platform's state, every
 * team's load in it, so no team's key opens it.
 */
export function registerMetricsRoute(app: FastifyInstance, metrics: MetricsExposition): void {
  app.get(METRICS_PATH, { config: ADMIN_ROUTE }, async (_request, reply) => {
    const { contentType, body } = await metrics.exposition();
    return reply.code(200).header('cache-control', 'no-store').type(contentType).send(body);
  });
}

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * A listener that serves only `GET /metrics`, without authentication (TIDEPOOL_METRICS_ADDRESS: meant for a
 * loopback or otherwise private address that only Prometheus reaches). Everything else is a 404.
 */
export async function startMetricsListener(address: string, metrics: MetricsExposition, logger: Logger): Promise<MetricsListener> {
  const { host, port } = parseListenAddress(address);
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== METRICS_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: only GET /metrics is served here\n');
      return;
    }
    metrics.exposition().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
      },
      (err: unknown) => {
        logger.error({ err }, 'collecting metrics failed');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('collecting metrics failed\n');
      },
    );
  });
  server.keepAliveTimeout = 65_000;
  const url = `${listenerOrigin('http', await listenOn(server, port, host))}${METRICS_PATH}`;
  logger.info({ url }, 'metrics listening (no authentication on this address)');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
