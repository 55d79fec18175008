/**
 * PostgreSQL restarting under load (issue 17, "hostile parts"): a platform on TIDEPOOL_DATABASE_URL keeps creating,
 * listing and proxying while its database goes away for two seconds and comes back. While it is down the REST API
 * answers in its own `{code, message}` shape (nothing hangs past the pool's 10 s connect deadline, the process stays
 * up), a sandbox already running keeps serving commands (the proxy answers from its cache), and afterwards creates
 * work again, the change feed listens again (a row changed by "another replica" reaches the cache) and no create
 * cut off by the outage left a container without a record.
 */
import { type PostgresServer, startPostgres } from '@tidepool/testkit';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { pollUntil } from './support/poll-until.ts';
import { pgRows } from './support/pg-rows.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

let server: PostgresServer;
const rowsOf = (sql: string, params: unknown[] = []) => pgRows(server.url, sql, params);
let platform: TestPlatform;

/** Sandbox ids of this platform's containers on the engine. */
async function containerSandboxes(): Promise<string[]> {
  const containers = await new Docker().listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } });
  return containers.map((c) => c.Labels[SANDBOX_LABEL]).filter((id): id is string => Boolean(id)).sort();
}

interface Outcome {
  what: string;
  status: number;
  body: unknown;
}

beforeAll(async () => {
  server = await startPostgres();
  platform = await startTestPlatform({ databaseUrl: server.url });
}, 600_000);

afterAll(async () => {
  await platform?.dispose();
  await server?.dispose();
}, 120_000);

describe('the platform while PostgreSQL restarts under load', () => {
  it('answers in the protocol shape while it is down, keeps proxying, recovers, and leaves nothing half-made', async () => {
    const kept = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 600_000, metadata: { role: 'kept' } });
    const outcomes: Outcome[] = [];
    const commandFailures: string[] = [];
    /** Sandboxes whose kill failed during the outage: the client kills them again afterwards, as a client would. */
    const unkilled: string[] = [];
    let commands = 0;
    let stop = false;
    const timed = async (what: string, method: string, path: string, body?: unknown): Promise<Outcome> => {
      const outcome = await Promise.race([
        api(platform, method, path, body).then(({ status, body: answer }) => ({ what, status, body: answer as unknown })),
        new Promise<Outcome>((resolve) => setTimeout(() => resolve({ what, status: 0, body: 'no answer within 45 s' }), 45_000).unref()),
      ]);
      outcomes.push(outcome);
      return outcome;
    };
    const creator = async (): Promise<void> => {
      while (!stop) {
        const created = await timed('create', 'POST', '/sandboxes', { templateID: 'base', timeout: 300 });
        const id = (created.body as { sandboxID?: string } | undefined)?.sandboxID;
        if (created.status === 201 && id) {
          const killed = await timed('kill', 'DELETE', `/sandboxes/${id}`);
          if (killed.status !== 204 && killed.status !== 404) unkilled.push(id);
        } else await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };
    const lister = async (): Promise<void> => {
      while (!stop) {
        await timed('list', 'GET', '/v2/sandboxes');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const commander = async (): Promise<void> => {
      while (!stop) {
        commands += 1;
        try {
          const result = await kept.commands.run('echo alive', { requestTimeoutMs: 30_000 });
          if (result.stdout.trim() !== 'alive') commandFailures.push(`stdout ${JSON.stringify(result.stdout)}`);
        } catch (error) {
          commandFailures.push((error as Error).message);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    try {
      const load = Promise.all([creator(), creator(), lister(), commander()]);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const downAt = Date.now();
      await server.restart(2_000);
      const upAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 8_000));
      stop = true;
      await load;
      const failed = outcomes.filter((o) => o.status < 200 || o.status >= 300);
      process.stdout.write(
        `[postgres-restart] down ${upAt - downAt} ms; ${outcomes.length} REST calls, ${failed.length} failed (${[...new Set(failed.map((o) => `${o.what} ${o.status}`))].join(', ') || 'none'}); ${commands} commands, ${commandFailures.length} failed\n`,
      );

      // Every failure is an answer in the REST shape, not a hang or a dropped connection.
      for (const o of failed) {
        expect(o.status, `${o.what}: ${JSON.stringify(o.body)}`).toBeGreaterThanOrEqual(500);
        expect(o.body, o.what).toMatchObject({ code: o.status, message: expect.any(String) });
      }
      // The running sandbox never depended on the database: its commands all went through.
      expect(commandFailures).toEqual([]);

      // Recovered: the process answers, kills and creates work, the list holds the kept sandbox.
      expect((await api(platform, 'GET', '/health')).status).toBe(200);
      for (const id of unkilled) expect([204, 404]).toContain((await api(platform, 'DELETE', `/sandboxes/${id}`)).status);
      const after = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
      expect((await after.commands.run('echo fresh')).stdout.trim()).toBe('fresh');
      await after.kill();
      const listed = (await api(platform, 'GET', '/v2/sandboxes')).body as Array<{ sandboxID: string }>;
      expect(listed.map((s) => s.sandboxID)).toContain(kept.sandboxId);

      // The change feed listens again: a row changed behind the platform's back (as another replica would) reaches it.
      await rowsOf('UPDATE sandboxes SET metadata = $1 WHERE sandbox_id = $2', [JSON.stringify({ role: 'changed elsewhere' }), kept.sandboxId]);
      await pollUntil(
        'the changed metadata reaches the cache',
        async () => ((await api(platform, 'GET', `/sandboxes/${kept.sandboxId}`)).body as { metadata?: Record<string, string> }).metadata?.role === 'changed elsewhere',
        40_000,
        200,
      );
    } finally {
      stop = true;
      await kept.kill().catch(() => undefined);
    }

    // Nothing half-made: every sandbox was killed, so once every create has settled no record and no container is left.
    let left = { records: [] as string[], containers: [] as string[] };
    await pollUntil(
      'no record and no container left',
      async () => {
        left = { records: (await rowsOf('SELECT sandbox_id FROM sandboxes')).map((r) => String(r.sandbox_id)), containers: await containerSandboxes() };
        return left.records.length === 0 && left.containers.length === 0;
      },
      60_000,
      500,
    ).catch((error: Error) => {
      throw new Error(`${error.message}: records ${JSON.stringify(left.records)}, containers ${JSON.stringify(left.containers)}`);
    });
  }, 300_000);
});
