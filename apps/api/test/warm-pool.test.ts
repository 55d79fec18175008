/**
 * The warm pool against real Docker and the published e2b SDK: creates are served from ready containers,
 * the pool refills, an empty pool falls back to a cold start, a claimed sandbox cannot be told from a cold
 * one from inside, pooled containers left by a previous run are removed (never leaked), a stop removes the
 * pool's containers whatever happens to the sandboxes, a template rebuild or removal drains its containers,
 * the refill waits for a new sandbox's first exchange, and the adaptive pool grows after a burst (the next burst is
 * served from it) and shrinks back when idle.
 */
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter';
import { Sandbox, Template } from 'e2b';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL, POOL_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { parseExposition, sampleValue } from './support/prometheus-text.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const docker = new Docker();
const started: TestPlatform[] = [];
afterAll(async () => {
  for (const platform of started) await platform.dispose().catch(() => undefined);
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Labelled {
  id: string;
  sandboxId: string;
  pool: string;
}

/** Every sandbox container of the platform, with its pool label ('' = started cold). */
async function containersOf(platform: TestPlatform): Promise<Labelled[]> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`, SANDBOX_LABEL] } });
  return list.map((c) => ({ id: c.Id, sandboxId: c.Labels[SANDBOX_LABEL], pool: c.Labels[POOL_LABEL] ?? '' }));
}

async function pooledIds(platform: TestPlatform): Promise<string[]> {
  return (await containersOf(platform)).filter((c) => c.pool !== '').map((c) => c.sandboxId);
}

/** One platform with a pool of two `base` containers, shared by the first tests. */
let shared: TestPlatform | undefined;
async function sharedPlatform(): Promise<TestPlatform> {
  if (!shared) {
    shared = await startTestPlatform({ warmPool: { base: 2 } });
    started.push(shared);
  }
  return shared;
}

const ready = (platform: TestPlatform): number => platform.warmPool!.stats().ready;

/** What a process in the sandbox sees of itself, with its own id written as SANDBOX and its random hostname as HOST. */
async function lookInside(sbx: Sandbox): Promise<Record<string, string>> {
  const host = (await sbx.commands.run('hostname')).stdout.trim();
  // Random, and unrelated to the id (neighbours resolve hostnames through Docker's embedded DNS).
  expect(host).toMatch(/^sbx-[0-9a-f]{20}$/);
  const run = async (cmd: string, user?: 'root' | 'user'): Promise<string> =>
    (await sbx.commands.run(cmd, user ? { user } : {})).stdout.replaceAll(sbx.sandboxId, 'SANDBOX').replaceAll(host, 'HOST');
  return {
    hostname: await run('hostname'),
    etcHostname: await run('cat /etc/hostname'),
    // The address differs between any two sandboxes.
    hosts: (await run('cat /etc/hosts')).replace(/^[0-9.]+(\s+HOST)$/m, 'ADDRESS$1'),
    env: await run('env | grep -v -E "^(_|SHLVL|PWD|OLDPWD)=" | sort'),
    user: await run('id; whoami'),
    cwd: await run('pwd'),
    home: await run('find /home/user -printf "%p %s %m %u:%g %y\\n" | sort'),
    run: await run('find /run /tmp -printf "%p %m %u %y\\n" 2>/dev/null | sort', 'root'),
    // One simple command (bash execs ps itself), sorted here: a pipeline's own processes race each other.
    processes: (await run('ps -e -o user=,comm=,args=')).split('\n').sort().join('\n'),
  };
}

describe('warm pool', () => {
  it('serves creates from ready containers, refills, and falls back to a cold start when empty', async () => {
    const platform = await sharedPlatform();
    await until(() => ready(platform) === 2, 60_000, 'two ready containers');
    const waiting = await pooledIds(platform);
    expect(waiting).toHaveLength(2);

    const sbx = await Sandbox.create('base', { ...platform.sdk, envs: { FROM_CREATE: 'yes' }, metadata: { purpose: 'pool' } });
    expect((await sbx.commands.run('echo $FROM_CREATE')).stdout.trim()).toBe('yes');
    // The id and the container are one of the ready ones; a claim does not start a container.
    expect(waiting).toContain(sbx.sandboxId);
    expect(platform.warmPool!.stats()).toMatchObject({ claimedTotal: 1, coldFallbacksTotal: 0 });
    const detail = (await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body;
    expect(detail).toMatchObject({ sandboxID: sbx.sandboxId, templateID: 'base', metadata: { purpose: 'pool' }, state: 'running' });

    // Refilled in the background: two ready again, beside the claimed one.
    await until(() => ready(platform) === 2, 60_000, 'the pool to refill');
    expect((await pooledIds(platform)).length).toBe(3);

    // Three at once from a pool of two: two claims, one cold start; all three work.
    const trio = await Promise.all([0, 1, 2].map(() => Sandbox.create('base', platform.sdk)));
    for (const s of trio) expect((await s.commands.run('echo ok')).stdout.trim()).toBe('ok');
    expect(platform.warmPool!.stats()).toMatchObject({ claimedTotal: 3, coldFallbacksTotal: 1 });
    const labels = new Map((await containersOf(platform)).map((c) => [c.sandboxId, c.pool]));
    expect(trio.filter((s) => labels.get(s.sandboxId) === '')).toHaveLength(1);

    // Killing a claimed sandbox removes its container like any other.
    await sbx.kill();
    await until(async () => !(await containersOf(platform)).some((c) => c.sandboxId === sbx.sandboxId), 10_000, 'the claimed container to go');
    for (const s of trio) await s.kill();
    await until(() => ready(platform) === 2, 60_000, 'the pool to refill after the burst');
  });

  it('hands out containers a user cannot tell from cold ones (hostname, env, user, cwd, files, processes)', async () => {
    const platform = await sharedPlatform();
    await until(() => ready(platform) === 2, 60_000, 'two ready containers');
    // No env vars of its own: the claim skips /init (envd got the same one while it warmed). The first test
    // covers a claim with env vars (a second /init).
    const [a, b, cold] = await Promise.all([Sandbox.create('base', platform.sdk), Sandbox.create('base', platform.sdk), Sandbox.create('base', platform.sdk)]);
    const labels = new Map((await containersOf(platform)).map((c) => [c.sandboxId, c.pool]));
    const pooled = [a, b, cold].find((s) => labels.get(s.sandboxId) !== '')!;
    const coldOne = [a, b, cold].find((s) => labels.get(s.sandboxId) === '')!;
    expect(pooled).toBeDefined();
    expect(coldOne).toBeDefined();
    const inPooled = await lookInside(pooled);
    const inCold = await lookInside(coldOne);
    expect(inPooled.hostname.trim()).toBe('HOST');
    expect(inPooled.env).toContain('E2B_SANDBOX=true');
    expect(inPooled).toEqual(inCold);
    for (const s of [a, b, cold]) await s.kill();
  });

  it("holds its refill until a new sandbox's first exchange has ended (the burst's first commands go first)", async () => {
    const platform = await sharedPlatform();
    await until(() => ready(platform) === 2, 60_000, 'two ready containers');
    await until(() => !platform.lifecycle.awaitingFirstUse(), 5_000, 'earlier sandboxes to be served or lapse');
    const sbx = await Sandbox.create('base', platform.sdk);
    // The create itself is an API call, not an exchange with the sandbox: the refill waits (at most 3 s).
    expect(platform.lifecycle.awaitingFirstUse()).toBe(true);
    expect((await sbx.commands.run('echo served')).stdout.trim()).toBe('served');
    await until(() => !platform.lifecycle.awaitingFirstUse(), 2_000, 'the first command to count as served');
    await until(() => ready(platform) === 2, 60_000, 'the pool to refill');
    await sbx.kill();
  });

  it('counts pooled containers against the sandbox limit', async () => {
    const platform = await startTestPlatform({ warmPool: { base: 2 }, maxSandboxes: 3 });
    started.push(platform);
    await until(() => ready(platform) === 2, 60_000, 'two ready containers');
    const first = await Sandbox.create('base', platform.sdk);
    // One sandbox and two ready containers fill the three slots: the pool refills to two, not beyond.
    await until(() => ready(platform) === 2, 60_000, 'the pool to refill');
    const more = [await Sandbox.create('base', platform.sdk), await Sandbox.create('base', platform.sdk)];
    await new Promise((r) => setTimeout(r, 1_500));
    expect(platform.warmPool!.stats()).toMatchObject({ ready: 0, warming: 0, claimedTotal: 3 });
    const refused = await api(platform, 'POST', '/sandboxes', { templateID: 'base' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(429);
    await first.kill();
    // A freed slot goes back to the pool.
    await until(() => ready(platform) === 1, 60_000, 'the pool to take the freed slot');
    for (const s of more) await s.kill();
  });

  it('removes the pooled containers a previous run left (never adopted, never leaked) and adopts claimed sandboxes', async () => {
    const first = await startTestPlatform({ warmPool: { base: 2 } });
    await until(() => ready(first) === 2, 60_000, 'two ready containers');
    const claimed = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000 });
    await until(() => ready(first) === 2, 60_000, 'the pool to refill');
    const readyIds = (await pooledIds(first)).filter((id) => id !== claimed.sandboxId);
    expect(readyIds).toHaveLength(2);
    // A crash in the middle of a claim leaves its container behind: taken out of the pool as a claim would, never claimed.
    const cutShort = first.warmPool!.take(first.warmPool!.keys()[0].key)!;
    await first.close({ keepSandboxes: true });
    // Kept sandboxes keep running; the pool's ready containers do not (they are no sandboxes): only the cut-short one is left.
    const leftReady = [cutShort.sandboxId];
    expect((await pooledIds(first)).sort()).toEqual([...leftReady, claimed.sandboxId].sort());

    // The key was generated on the first start (stored hashed): the second start has none of its own.
    const second = Object.assign(await startTestPlatform({ warmPool: { base: 2 } }, first.dataDir), { apiKey: first.apiKey });
    second.sdk.apiKey = first.apiKey;
    started.push(second);
    const after = await pooledIds(second);
    for (const id of leftReady) expect(after).not.toContain(id);
    const again = await Sandbox.connect(claimed.sandboxId, second.sdk);
    expect((await again.commands.run('echo adopted')).stdout.trim()).toBe('adopted');
    await until(() => ready(second) === 2, 60_000, 'the pool to refill after the restart');
    const now = await pooledIds(second);
    expect(now).toHaveLength(3);
    expect(now).toContain(claimed.sandboxId);
    await again.kill();
    await second.close();
    started.splice(started.indexOf(second), 1);
    expect(await containersOf(second)).toEqual([]);
    await second.dispose();
  });

  it('drains a template rebuild and removal from the pool and fills it with the new build', async () => {
    const name = `pool-tpl-${Date.now().toString(36)}`;
    const platform = await startTestPlatform({ warmPool: { [name]: 1 } });
    started.push(platform);
    const buildId = (key: string): string => key.split('/')[0];
    await Template.build(Template().fromTemplate('base').runCmd('echo one > /home/user/version.txt'), name, platform.sdk);
    await until(() => ready(platform) === 1, 60_000, 'the template to be pooled');
    const [firstKey] = platform.warmPool!.keys();
    const firstContainer = (await containersOf(platform)).find((c) => c.pool !== '')!;
    expect(buildId(firstContainer.pool)).toBe(buildId(firstKey.key));

    // The new build has a start command: pooled containers are started without it, a claim runs it (once).
    const withStart = Template().fromTemplate('base').runCmd('echo two > /home/user/version.txt').setStartCmd('sleep 4242', 'pgrep -x -f "sleep 4242"');
    await Template.build(withStart, name, platform.sdk);
    await until(async () => !(await containersOf(platform)).some((c) => c.id === firstContainer.id), 30_000, 'the old build to leave the pool');
    await until(() => ready(platform) === 1, 60_000, 'the new build to be pooled');
    const [secondKey] = platform.warmPool!.keys();
    expect(secondKey.key).not.toBe(firstKey.key);
    const sbx = await Sandbox.create(name, platform.sdk);
    expect(platform.warmPool!.stats(secondKey.key).claimedTotal).toBe(1);
    expect((await sbx.files.read('/home/user/version.txt')).trim()).toBe('two');
    expect((await sbx.commands.run('pgrep -c -x -f "sleep 4242"')).stdout.trim()).toBe('1');
    await sbx.kill();
    await until(() => ready(platform) === 1, 60_000, 'the pool to refill');

    // Removal: the pool gives its containers up first (their image could not go otherwise) and stays empty.
    expect((await api(platform, 'DELETE', `/templates/${name}`)).status).toBeLessThan(300);
    expect(await containersOf(platform)).toEqual([]);
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await containersOf(platform)).toEqual([]);
    expect(platform.warmPool!.stats().ready).toBe(0);
  });

  it('adapts to demand (defaults apart from short periods): a burst grows the pool, the next burst is served from it, idle shrinks it', { timeout: 360_000 }, async () => {
    // The default pool (adaptive, floor base=2, ceiling 32, 4 refills at once), with a 3 s period and a 90 s idle
    // window (long enough for the refill on a loaded machine: the second burst must come while the first still counts).
    const platform = await startTestPlatform({ warmPoolAdaptive: true, warmPoolPeriodSeconds: 3, warmPoolIdleSeconds: 90 });
    started.push(platform);
    const pool = platform.warmPool!;
    const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> => sampleValue(parseExposition((await platform.metrics.exposition()).body), name, labels);
    await until(() => ready(platform) === 2, 60_000, 'the floor of two ready containers');
    expect(pool.keys()).toEqual([expect.objectContaining({ reference: 'base', size: 2, reason: 'floor' })]);

    const BURST = 6;
    const burstOf = async (): Promise<void> => {
      const sandboxes = await Promise.all(Array.from({ length: BURST }, () => Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 })));
      for (const s of sandboxes) expect((await s.commands.run('echo ok')).stdout.trim()).toBe('ok');
      await Promise.all(sandboxes.map((s) => s.kill()));
    };
    const firstBurstAt = Date.now();
    await burstOf();
    // Two from the floor, four cold.
    expect(pool.stats()).toMatchObject({ claimedTotal: 2, coldFallbacksTotal: BURST - 2 });
    await until(() => ready(platform) === BURST, 180_000, 'the pool to grow to the burst');
    expect(pool.keys()[0]).toMatchObject({ size: BURST, reason: 'demand' });
    expect(await metric('tidepool_pool_target_containers')).toBe(BURST);
    expect(await metric('tidepool_pool_size_decisions_total', { direction: 'grow', reason: 'demand' })).toBeGreaterThanOrEqual(1);

    // Some time (more than a period) later, the same burst again: every create is a claim.
    await new Promise((r) => setTimeout(r, Math.max(0, firstBurstAt + 4_000 - Date.now())));
    expect(ready(platform)).toBe(BURST);
    await burstOf();
    expect(pool.stats()).toMatchObject({ claimedTotal: 2 + BURST, coldFallbacksTotal: BURST - 2 });
    expect(await metric('tidepool_pool_claims_total')).toBe(2 + BURST);
    expect(await metric('tidepool_pool_cold_fallbacks_total')).toBe(BURST - 2);

    // Idle for the window: back to the floor, the surplus removed.
    await until(() => pool.keys()[0]?.size === 2 && ready(platform) === 2 && pool.stats().warming === 0, 180_000, 'the pool to shrink to its floor');
    await until(async () => (await pooledIds(platform)).length === 2, 30_000, 'the surplus containers to be removed');
    expect(await metric('tidepool_pool_size_decisions_total', { direction: 'shrink', reason: 'floor' })).toBeGreaterThanOrEqual(1);

    // A stop that keeps sandboxes still removes the pool's containers: nothing of this platform is left running.
    await platform.close({ keepSandboxes: true });
    expect(await containersOf(platform)).toEqual([]);
  });

  it("runs a template's start command while warming: a code-interpreter claim finds its server up; a create with env vars starts cold with them", async () => {
    const platform = await startTestPlatform({ warmPool: { 'code-interpreter': 1 } });
    started.push(platform);
    await until(() => ready(platform) === 1, 180_000, 'a ready code-interpreter container');
    const waiting = await pooledIds(platform);
    // Long enough that a server started at claim time could not look this old.
    await new Promise((r) => setTimeout(r, 3000));

    const sbx = await CodeInterpreter.create({ ...platform.sdk, timeoutMs: 300_000 });
    try {
      expect(waiting).toContain(sbx.sandboxId);
      expect((await sbx.runCode('1+1')).text).toBe('2');
      const server = (await sbx.commands.run('ps -o etimes= -p "$(pgrep -f -o server.mjs)"')).stdout.trim();
      expect(Number(server)).toBeGreaterThanOrEqual(3);
      expect(platform.warmPool!.stats()).toMatchObject({ claimedTotal: 1 });
    } finally {
      await sbx.kill();
    }

    await until(() => ready(platform) === 1, 180_000, 'the pool to refill');
    const own = await CodeInterpreter.create({ ...platform.sdk, timeoutMs: 300_000, envs: { FROM_CREATE: 'mine' } });
    try {
      expect(await pooledIds(platform)).not.toContain(own.sandboxId);
      expect(platform.warmPool!.stats()).toMatchObject({ claimedTotal: 1, ready: 1 });
      // The server (the start command) itself has the create's variable, not only the code it runs.
      const environ = await own.commands.run('tr "\\0" "\\n" < /proc/"$(pgrep -f -o server.mjs)"/environ | grep ^FROM_CREATE=');
      expect(environ.stdout.trim()).toBe('FROM_CREATE=mine');
      expect((await own.runCode('import os; os.environ["FROM_CREATE"]')).text).toBe('mine');
    } finally {
      await own.kill();
    }
  }, 600_000);
});
