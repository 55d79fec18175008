/**
 * The platform on PostgreSQL (TIDEPOOL_DATABASE_URL at a throwaway cluster) serving the published e2b SDK:
 * create, commands, files, pause/resume, list, kill; the rows are in PostgreSQL (no SQLite file), and a
 * restart on another data directory finds its sandboxes, keys and identity there.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type PostgresServer, startPostgres } from '@tidepool/testkit';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { pgRows } from './support/pg-rows.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

let server: PostgresServer;
const rowsOf = (sql: string, params: unknown[] = []) => pgRows(server.url, sql, params);
let platform: TestPlatform | undefined;
let restarted: TestPlatform | undefined;

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  server = await startPostgres();
  platform = await startTestPlatform({ databaseUrl: server.url });
}, 600_000);

afterAll(async () => {
  await restarted?.dispose();
  await platform?.dispose();
  await server?.dispose();
}, 120_000);

describe('platform on PostgreSQL', () => {
  it('serves the SDK: create, commands, files, pause/resume, list, kill; rows live in PostgreSQL', async () => {
    const p = platform!;
    expect(existsSync(join(p.dataDir, 'tidepool.db'))).toBe(false);
    const sbx = await Sandbox.create('base', { ...p.sdk, timeoutMs: 120_000, metadata: { suite: 'postgres' } });
    try {
      expect((await sbx.commands.run('echo hello from $(whoami)')).stdout.trim()).toBe('hello from user');
      await sbx.files.write('/home/user/note.txt', 'kept across a pause');
      expect(await sbx.files.read('/home/user/note.txt')).toBe('kept across a pause');

      const [row] = await rowsOf('SELECT state, metadata, template_id FROM sandboxes WHERE sandbox_id = $1', [sbx.sandboxId]);
      expect(row).toMatchObject({ state: 'running', template_id: 'base' });
      expect(JSON.parse(String(row!.metadata))).toEqual({ suite: 'postgres' });
      expect((await rowsOf('SELECT COUNT(*)::int AS n FROM api_keys'))[0]!.n).toBeGreaterThan(0);

      const listed = await Sandbox.list({ ...p.sdk, query: { metadata: { suite: 'postgres' } } }).nextItems();
      expect(listed.map((s) => s.sandboxId)).toEqual([sbx.sandboxId]);

      await Sandbox.pause(sbx.sandboxId, { ...p.sdk, keepMemory: false } as never);
      expect((await rowsOf('SELECT state, paused_image FROM sandboxes WHERE sandbox_id = $1', [sbx.sandboxId]))[0]).toMatchObject({ state: 'paused', paused_image: expect.any(String) });
      expect((await api(p, 'GET', `/sandboxes/${sbx.sandboxId}`)).body.state).toBe('paused');

      const resumed = await Sandbox.connect(sbx.sandboxId, { ...p.sdk, timeoutMs: 120_000 });
      expect(await resumed.files.read('/home/user/note.txt')).toBe('kept across a pause');
      expect((await rowsOf('SELECT state FROM sandboxes WHERE sandbox_id = $1', [sbx.sandboxId]))[0]).toMatchObject({ state: 'running' });
      const events = await rowsOf('SELECT message FROM sandbox_events WHERE sandbox_id = $1 ORDER BY id', [sbx.sandboxId]);
      expect(events.map((e) => e.message)).toEqual([expect.stringMatching(/created/), expect.stringMatching(/paused \(filesystem only\)/), 'sandbox resumed']);

      await resumed.kill();
      expect(await rowsOf('SELECT 1 FROM sandboxes WHERE sandbox_id = $1', [sbx.sandboxId])).toEqual([]);
      expect(await rowsOf('SELECT 1 FROM sandbox_events WHERE sandbox_id = $1', [sbx.sandboxId])).toEqual([]);
      expect((await api(p, 'GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    } finally {
      await Sandbox.kill(sbx.sandboxId, p.sdk).catch(() => undefined);
    }
  }, 300_000);

  it('timeouts act once through the row lease: a kill removes the row, an auto-pause leaves the lease released', async () => {
    const p = platform!;
    const paused = await Sandbox.create('base', { ...p.sdk, timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } } as never);
    const killed = await Sandbox.create('base', { ...p.sdk, timeoutMs: 2_000 });
    try {
      await waitFor(async () => (await api(p, 'GET', `/sandboxes/${killed.sandboxId}`)).status === 404, 20_000);
      expect(await rowsOf('SELECT 1 FROM sandboxes WHERE sandbox_id = $1', [killed.sandboxId])).toEqual([]);
      await waitFor(async () => (await api(p, 'GET', `/sandboxes/${paused.sandboxId}`)).body.state === 'paused', 20_000);
      // The pause is stored before the lease is given back.
      await waitFor(async () => (await rowsOf('SELECT lease_owner FROM sandboxes WHERE sandbox_id = $1', [paused.sandboxId]))[0]?.lease_owner === null, 5_000);
      expect((await rowsOf('SELECT state FROM sandboxes WHERE sandbox_id = $1', [paused.sandboxId]))[0]).toEqual({ state: 'paused' });
      // One event per attempt (a pause that failed on a loaded engine is retried by the same replica).
      const events = await rowsOf('SELECT message FROM sandbox_events WHERE sandbox_id = $1 ORDER BY id', [paused.sandboxId]);
      expect(events.filter((e) => e.message === 'sandbox timeout reached').length).toBeGreaterThanOrEqual(1);
      expect(events.at(-1)?.message).toMatch(/^sandbox paused/);
    } finally {
      await Sandbox.kill(paused.sandboxId, p.sdk).catch(() => undefined);
      await Sandbox.kill(killed.sandboxId, p.sdk).catch(() => undefined);
    }
  }, 120_000);

  it('a restart on another data directory finds the paused sandbox, the key and the platform identity in the database', async () => {
    const p = platform!;
    const sbx = await Sandbox.create('base', { ...p.sdk, timeoutMs: 120_000 });
    await sbx.files.write('/home/user/state.txt', 'before restart');
    await Sandbox.pause(sbx.sandboxId, { ...p.sdk, keepMemory: false } as never);
    const { platformId, sdk } = p;
    await p.close({ keepSandboxes: true });
    restarted = await startTestPlatform({ databaseUrl: server.url, apiKeys: [] });
    expect(restarted.dataDir).not.toBe(p.dataDir);
    expect(restarted.platformId).toBe(platformId);
    expect(restarted.apiKeyGenerated).toBe(false);
    const again = { ...restarted.sdk, apiKey: sdk.apiKey };
    const listed = await Sandbox.list(again).nextItems();
    expect(listed.map((s) => [s.sandboxId, s.state])).toEqual([[sbx.sandboxId, 'paused']]);
    const resumed = await Sandbox.connect(sbx.sandboxId, { ...again, timeoutMs: 120_000 });
    expect(await resumed.files.read('/home/user/state.txt')).toBe('before restart');
    await resumed.kill();
    expect(await Sandbox.list(again).nextItems()).toEqual([]);
  }, 300_000);
});

describe('TIDEPOOL_DATABASE_URL validation', () => {
  it.each([
    ['mysql://u@h/db', /only PostgreSQL is supported/],
    ['postgres://', /not a URL|names no host/],
    ['postgres://h', /names no database/],
    ['postgres://h:5432/', /names no database/],
    ['not a url', /not a URL/],
  ])('refuses %j with an actionable message', (url, message) => {
    const error = (() => {
      try {
        loadConfig({ TIDEPOOL_DATABASE_URL: url });
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(/TIDEPOOL_DATABASE_URL/);
    expect((error as Error).message).toMatch(message);
  });

  it('never echoes the password of a refused URL', () => {
    expect(() => loadConfig({ TIDEPOOL_DATABASE_URL: 'mysql://u:hunter2@h/db' })).toThrow(/^(?![\s\S]*hunter2)/);
  });

  it('accepts postgres:// and postgresql:// URLs, and unset (SQLite)', () => {
    expect(loadConfig({ TIDEPOOL_DATABASE_URL: 'postgresql://u:p@db.internal:5432/tidepool?sslmode=require' }).databaseUrl).toMatch(/^postgresql:/);
    expect(loadConfig({}).databaseUrl).toBe('');
  });
});
