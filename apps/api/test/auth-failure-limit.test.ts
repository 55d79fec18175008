/**
 * Failed API keys are limited per client address through the real server: after the limit, that address gets
 * 429 {code, message} with Retry-After (its right key too) until the window passes, while another address
 * (127.0.0.2, also loopback) keeps working; X-Forwarded-For is not trusted unless the setting says so.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const LIMIT = 3;
const WINDOW_SECONDS = 3;
let platform: TestPlatform;

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: any;
}

function get(path: string, key: string | undefined, from = '127.0.0.1', extra: Record<string, string> = {}): Promise<Answer> {
  const url = new URL(path, platform.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, localAddress: from, headers: { ...(key === undefined ? {} : { 'x-api-key': key }), ...extra } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body: res.headers['content-type']?.includes('json') ? JSON.parse(text) : text }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  platform = await startTestPlatform({ authFailureLimit: LIMIT, authFailureWindowSeconds: WINDOW_SECONDS });
}, 120_000);

afterAll(async () => {
  await platform?.dispose();
});

describe('failed API key limit per client address', () => {
  it('answers 429 with Retry-After after the limit, spares other addresses, and lifts after the window', async () => {
    expect((await get('/v2/sandboxes', platform.apiKey)).status).toBe(200);
    // Wrong and missing keys both count; a forged X-Forwarded-For does not make a new client.
    const failures = [await get('/v2/sandboxes', 'wrong-1'), await get('/v2/sandboxes', undefined), await get('/v2/sandboxes', 'wrong-3', '127.0.0.1', { 'x-forwarded-for': '198.18.0.9' })];
    expect(failures.map((f) => f.status)).toEqual([401, 401, 401]);
    const started = Date.now();

    const limited = await get('/v2/sandboxes', 'wrong-4', '127.0.0.1', { 'x-forwarded-for': '198.18.0.10' });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ code: 429, message: expect.stringMatching(/Too many failed API key attempts/) });
    expect(Number(limited.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(limited.retryAfter)).toBeLessThanOrEqual(WINDOW_SECONDS);
    // The limited address is refused even with the right key (no more guesses, right or wrong, until the window ends)…
    expect((await get('/v2/sandboxes', platform.apiKey)).status).toBe(429);
    // …but another client is unaffected, and the open routes still answer.
    expect((await get('/v2/sandboxes', platform.apiKey, '127.0.0.2')).status).toBe(200);
    expect((await get('/health', undefined)).status).toBe(200);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, WINDOW_SECONDS * 1000 - (Date.now() - started)) + 300));
    expect((await get('/v2/sandboxes', platform.apiKey)).status).toBe(200);
    expect((await get('/v2/sandboxes', 'wrong-again')).status).toBe(401);
  }, 60_000);
});
