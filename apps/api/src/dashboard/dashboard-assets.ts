import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { OPEN_ROUTE } from '../http/route-auth.ts';

/** Where the dashboard lives on the API's origin. */
export const DASHBOARD_PREFIX = '/dashboard';

/**
 * Where the dashboard's files are, relative to this module: set by apps/api/scripts/bundle.mjs (esbuild `define`) in
 * the compiled release, whose files sit beside the bundle; undeclared when run from source.
 */
declare const __TIDEPOOL_DASHBOARD_DIR__: string | undefined;

/** `apps/dashboard/dist`, built by `pnpm --filter @tidepool/dashboard build` (in the release: `dashboard/` beside the bundle). */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(
  new URL(typeof __TIDEPOOL_DASHBOARD_DIR__ === 'string' ? __TIDEPOOL_DASHBOARD_DIR__ : '../../../dashboard/dist', import.meta.url),
);

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

/**
 * Same origin only, but for frames of sandbox hosts (`<port>-<id>.<domain>`, the desktop view's noVNC page, on their
 * own origins); xterm.js sets inline styles, nothing else is inline.
 */
export function contentSecurityPolicy(sandboxDomain: string): string {
  return [
    "default-src 'self'",
    `frame-src 'self' *.${sandboxDomain}:*`,
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join('; ');
}

/** What the dashboard's pages need to know about the platform: `GET /dashboard/platform.json`. */
export interface DashboardPlatformInfo {
  /** TIDEPOOL_DOMAIN: sandbox hosts are `<port>-<id>.<sandboxDomain>`. */
  sandboxDomain: string;
  /** TIDEPOOL_PUBLIC_DOMAIN (`host[:port]`, HTTPS) when set, else null. */
  publicDomain: string | null;
}

export interface DashboardRouteOptions {
  /** The built dashboard (default: apps/dashboard/dist). */
  dir?: string;
  /** TIDEPOOL_DOMAIN. */
  sandboxDomain: string;
  /** TIDEPOOL_PUBLIC_DOMAIN, or null. */
  publicDomain: () => string | null;
}

interface Asset {
  body: Buffer;
  type: string;
}

/** Every file of the built dashboard, read once: requests can only name one of these (no path ever reaches the disk). */
function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const walk = (current: string): void => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const full = join(current, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() && TYPES[extname(entry.name)]) {
        assets.set(relative(dir, full).split(sep).join('/'), { body: readFileSync(full), type: TYPES[extname(entry.name)] });
      }
    }
  };
  walk(dir);
  return assets;
}

function secure(reply: FastifyReply, policy: string): FastifyReply {
  return reply
    .header('content-security-policy', policy)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache');
}

/**
 * `GET /dashboard/…`: the static single-page dashboard, open (the page asks for the API key and keeps it in the
 * browser; everything it then calls needs the key). A missing build answers 503 with how to build it
 * (the API itself keeps working). Reached only on the API's own hosts: the sandbox proxy takes every request
 * for a sandbox host or with sandbox routing headers before the router sees it.
 */
export function registerDashboardRoutes(app: FastifyInstance, logger: Logger, options: DashboardRouteOptions): void {
  const dir = options.dir ?? DEFAULT_DASHBOARD_DIR;
  const policy = contentSecurityPolicy(options.sandboxDomain);
  const assets = existsSync(join(dir, 'index.html')) && statSync(dir).isDirectory() ? loadAssets(dir) : undefined;
  if (assets) logger.debug({ dir, files: assets.size }, 'dashboard: serving built assets');
  else logger.warn({ dir }, 'dashboard: not built (pnpm --filter @tidepool/dashboard build); /dashboard answers 503');

  const serve = async (name: string, reply: FastifyReply): Promise<FastifyReply> => {
    if (!assets) {
      return secure(reply, policy).code(503).type('text/plain; charset=utf-8').send('The dashboard is not built: run `pnpm --filter @tidepool/dashboard build` and restart the API.\n');
    }
    const asset = assets.get(name);
    if (!asset) return secure(reply, policy).code(404).send({ code: 404, message: 'No such dashboard file' });
    return secure(reply, policy).code(200).type(asset.type).send(asset.body);
  };

  // Before the files' wildcard: not a file, and answered whether or not the dashboard is built.
  app.get(`${DASHBOARD_PREFIX}/platform.json`, { config: OPEN_ROUTE }, async (_request, reply) => {
    const info: DashboardPlatformInfo = { sandboxDomain: options.sandboxDomain, publicDomain: options.publicDomain() };
    return secure(reply, policy).code(200).type('application/json; charset=utf-8').send(info);
  });
  app.get(DASHBOARD_PREFIX, { config: OPEN_ROUTE }, async (_request, reply) => reply.redirect(`${DASHBOARD_PREFIX}/`, 302));
  app.get(`${DASHBOARD_PREFIX}/`, { config: OPEN_ROUTE }, async (_request, reply) => serve('index.html', reply));
  app.get(`${DASHBOARD_PREFIX}/*`, { config: OPEN_ROUTE }, async (request, reply) => serve((request.params as { '*': string })['*'], reply));
}
