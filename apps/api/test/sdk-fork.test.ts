/**
 * Fork end to end through the published e2b SDK: `sbx.fork()` / `Sandbox.fork(id, {count, timeoutMs})` against
 * the real platform. Forks get the source's files, metadata and envs; the source keeps its ID, expiry and
 * processes; bad counts and unknown sandboxes fail clearly.
 */
import { randomBytes } from 'node:crypto';
import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { probe, rejectionOf, removeTemplatesAndSandboxes } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const metadata = { suite: `fork-${run}`, owner: 'a b&c=d' };

let platform: TestPlatform;
let source: Sandbox;
let sourceProcess: number;

function sandboxesOf(results: Array<Sandbox | Error>): Sandbox[] {
  for (const result of results) {
    if (!(result instanceof Sandbox)) throw result;
  }
  return results as Sandbox[];
}

async function running(): Promise<string[]> {
  const listed = await Sandbox.list({ ...platform.sdk, query: { metadata: { suite: metadata.suite }, state: ['running'] } }).nextItems();
  return listed.map((s) => s.sandboxId).sort();
}

beforeAll(async () => {
  platform = await startTestPlatform();
  source = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 600_000, metadata, envs: { FORK_ENV: `env-${run}` } });
  await source.files.write('/home/user/state.txt', `state before fork ${run}`);
  await source.commands.run(`mkdir -p /opt/fork && echo root-${run} > /opt/fork/r.txt`, { user: 'root' });
  sourceProcess = (await source.commands.run('sleep 900', { background: true, timeoutMs: 0 })).pid;
});

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
}, 300_000);

describe('fork', () => {
  it('count 1 (default): an independent copy with the files, metadata and envs; the source keeps its ID, expiry and processes', { timeout: 300_000 }, async () => {
    const before = await source.getInfo();
    const forks = await source.fork();
    expect(forks).toHaveLength(1);
    const [fork] = sandboxesOf(forks);
    try {
      expect(fork.sandboxId).toMatch(/^i[a-z0-9]{20}$/);
      expect(fork.sandboxId).not.toBe(source.sandboxId);
      const info = await fork.getInfo();
      expect(info).toMatchObject({ state: 'running', metadata });
      // Without timeoutMs the SDK sends no timeout: the fork gets the platform's default lifetime (15 s by default).
      expect(Math.abs(info.endAt.getTime() - Date.now() - platform.config.defaultTimeoutSeconds * 1000)).toBeLessThan(5_000);
      await fork.setTimeout(120_000);
      expect(await fork.isRunning()).toBe(true);
      expect(
        await probe(fork, { state: 'cat /home/user/state.txt', rootFile: 'cat /opt/fork/r.txt', env: 'echo "$FORK_ENV"', whoami: 'whoami', pwd: 'pwd' }),
      ).toEqual({ state: `state before fork ${run}`, rootFile: `root-${run}`, env: `env-${run}`, whoami: 'user', pwd: '/home/user' });

      // Independent both ways.
      await fork.files.write('/home/user/state.txt', 'modified in fork');
      await source.files.write('/home/user/source-only.txt', 'source');
      expect(await source.files.read('/home/user/state.txt')).toBe(`state before fork ${run}`);
      expect(await fork.files.exists('/home/user/source-only.txt')).toBe(false);

      // The source: same ID, still running, same expiry, its background process alive.
      const after = await source.getInfo();
      expect(after).toMatchObject({ sandboxId: source.sandboxId, state: 'running' });
      expect(after.endAt.getTime()).toBe(before.endAt.getTime());
      expect((await source.commands.list()).map((p) => p.pid)).toContain(sourceProcess);
      expect((await source.commands.run('echo alive')).stdout).toBe('alive\n');
    } finally {
      await fork.kill();
    }
  });

  it('count 3 with timeoutMs: three distinct running forks, each with the state and the given lifetime', { timeout: 300_000 }, async () => {
    const forks = sandboxesOf(await Sandbox.fork(source.sandboxId, { ...platform.sdk, count: 3, timeoutMs: 120_000 }));
    try {
      expect(forks).toHaveLength(3);
      const ids = forks.map((f) => f.sandboxId);
      expect(new Set(ids).size).toBe(3);
      expect(ids).not.toContain(source.sandboxId);
      expect(await running()).toEqual([source.sandboxId, ...ids].sort());
      for (const fork of forks) {
        const info = await fork.getInfo();
        expect(info.metadata).toEqual(metadata);
        expect(Math.abs(info.endAt.getTime() - Date.now() - 120_000)).toBeLessThan(30_000);
        expect(await fork.files.read('/home/user/state.txt')).toBe(`state before fork ${run}`);
      }
      // Each fork is its own sandbox.
      await forks[0].files.write('/home/user/only-in-0.txt', 'x');
      expect(await forks[1].files.exists('/home/user/only-in-0.txt')).toBe(false);
    } finally {
      await Promise.all(forks.map((f) => f.kill()));
    }
    expect(await running()).toEqual([source.sandboxId]);
    expect((await source.commands.list()).map((p) => p.pid)).toContain(sourceProcess);
    // The checkpoint a fork starts from is internal: it is no user snapshot.
    expect(await Sandbox.listSnapshots({ ...platform.sdk, sandboxId: source.sandboxId }).nextItems()).toEqual([]);
  });

  it('refuses counts outside 1..100 and malformed bodies with 400, forking nothing', async () => {
    // SDK 2.51 sends any count; the platform refuses it.
    for (const count of [0, 101]) {
      const refused = await rejectionOf(Sandbox.fork(source.sandboxId, { ...platform.sdk, count }));
      expect(refused, `count ${count}`).toBeInstanceOf(SandboxError);
      expect(refused.statusCode, `count ${count}`).toBe(400);
    }
    for (const body of [{ count: 0 }, { count: -1 }, { count: 101 }, { count: 1.5 }, { count: '2' }, { timeout: -1 }, { timeout: 'soon' }, '{not json']) {
      const response = await api(platform, 'POST', `/sandboxes/${source.sandboxId}/fork`, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body, JSON.stringify(body)).toMatchObject({ code: 400, message: expect.any(String) });
    }
    expect(await running()).toEqual([source.sandboxId]);
  });

  it('unknown and killed sandboxes: SandboxNotFoundError', { timeout: 120_000 }, async () => {
    expect(await rejectionOf(Sandbox.fork('inosuchsandbox0000000', platform.sdk))).toBeInstanceOf(SandboxNotFoundError);
    const killed = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000 });
    await killed.kill();
    expect(await rejectionOf(killed.fork())).toBeInstanceOf(SandboxNotFoundError);
    const raw = await api(platform, 'POST', '/sandboxes/inosuchsandbox0000000/fork', { count: 1 });
    expect(raw).toMatchObject({ status: 404, body: { code: 404, message: expect.stringContaining('inosuchsandbox0000000') } });
  });
});
