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

/** Same origin only; xterm.js sets inline styles, nothing else is inline. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

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

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONTENT_SECURITY_POLICY)
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
export function registerDashboardRoutes(app: FastifyInstance, logger: Logger, dir = DEFAULT_DASHBOARD_DIR): void {
  const assets = existsSync(join(dir, 'index.html')) && statSync(dir).isDirectory() ? loadAssets(dir) : undefined;
  if (assets) logger.debug({ dir, files: assets.size }, 'dashboard: serving built assets');
  else logger.warn({ dir }, 'dashboard: not built (pnpm --filter @tidepool/dashboard build); /dashboard answers 503');

  const serve = async (name: string, reply: FastifyReply): Promise<FastifyReply> => {
    if (!assets) {
      return secure(reply).code(503).type('text/plain; charset=utf-8').send('The dashboard is not built: run `pnpm --filter @tidepool/dashboard build` and restart the API.\n');
    }
    const asset = assets.get(name);
    if (!asset) return secure(reply).code(404).send({ code: 404, message: 'No such dashboard file' });
    return secure(reply).code(200).type(asset.type).send(asset.body);
  };

  app.get(DASHBOARD_PREFIX, { config: OPEN_ROUTE }, async (_request, reply) => reply.redirect(`${DASHBOARD_PREFIX}/`, 302));
  app.get(`${DASHBOARD_PREFIX}/`, { config: OPEN_ROUTE }, async (_request, reply) => serve('index.html', reply));
  app.get(`${DASHBOARD_PREFIX}/*`, { config: OPEN_ROUTE }, async (request, reply) => serve((request.params as { '*': string })['*'], reply));
}
