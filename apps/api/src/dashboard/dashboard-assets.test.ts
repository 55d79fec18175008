import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { registerDashboardRoutes } from './dashboard-assets.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function built(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-dashboard-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>t</title>');
  writeFileSync(join(dir, 'app.js'), 'export {};');
  writeFileSync(join(dir, 'notes.txt'), 'not served: unknown type');
  mkdirSync(join(dir, 'fonts'));
  writeFileSync(join(dir, 'fonts', 'a.woff2'), 'woff');
  return dir;
}

async function appFor(dir: string, publicDomain: string | null = null) {
  const app = Fastify();
  registerDashboardRoutes(app, pino({ level: 'silent' }), { dir, sandboxDomain: 'tidepool.example.com', publicDomain: () => publicDomain });
  await app.ready();
  return app;
}

describe('registerDashboardRoutes', () => {
  it('serves the built files with their types and the security headers; redirects /dashboard; 404 for anything else', async () => {
    const app = await appFor(built());
    const index = await app.inject({ url: '/dashboard/' });
    expect(index.statusCode).toBe(200);
    expect(index.headers['content-type']).toMatch(/^text\/html/);
    expect(index.headers['content-security-policy']).toContain("script-src 'self'");
    expect(index.headers['x-frame-options']).toBe('DENY');
    // Frames only from sandbox hosts (the desktop view's noVNC page); everything else stays same-origin.
    expect(index.headers['content-security-policy']).toContain("frame-src 'self' *.tidepool.example.com:*;");
    expect(index.headers['content-security-policy']).toContain("default-src 'self'");
    expect((await app.inject({ url: '/dashboard/app.js' })).headers['content-type']).toMatch(/^text\/javascript/);
    expect((await app.inject({ url: '/dashboard/fonts/a.woff2' })).headers['content-type']).toBe('font/woff2');
    const redirect = await app.inject({ url: '/dashboard' });
    expect([redirect.statusCode, redirect.headers.location]).toEqual([302, '/dashboard/']);
    for (const url of ['/dashboard/notes.txt', '/dashboard/nope.js', '/dashboard/../index.html', '/dashboard/%2e%2e/etc/passwd']) {
      expect((await app.inject({ url })).statusCode, url).toBe(404);
    }
    expect((await app.inject({ method: 'HEAD', url: '/dashboard/app.js' })).statusCode).toBe(200);
    await app.close();
  });

  it('answers /dashboard/platform.json with the sandbox domain and the public domain, built or not', async () => {
    for (const [dir, publicDomain] of [[built(), null], [join(tmpdir(), 'tidepool-no-such-dashboard'), 'tidepool.example.com:8443']] as const) {
      const app = await appFor(dir, publicDomain);
      const response = await app.inject({ url: '/dashboard/platform.json' });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      expect(response.json()).toEqual({ sandboxDomain: 'tidepool.example.com', publicDomain });
      await app.close();
    }
  });

  it('answers 503 with how to build it when there is no build', async () => {
    const app = await appFor(join(tmpdir(), 'tidepool-no-such-dashboard'));
    const response = await app.inject({ url: '/dashboard/' });
    expect(response.statusCode).toBe(503);
    expect(response.body).toMatch(/pnpm --filter @tidepool\/dashboard build/);
    await app.close();
  });
});
