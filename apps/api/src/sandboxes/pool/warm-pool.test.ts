import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PlatformError } from '../../errors.ts';
import type { ContainerSpec, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { ResolvedTemplate } from '../../templates/template-model.ts';
import { type AdaptiveSettings, type PoolTemplate, WarmPool } from './warm-pool.ts';

// No envd behind the fake containers: health, the priming command, /init and the start command succeed at once.
const inits: Array<{ address: string; init: unknown }> = [];
const envd = {
  waitForEnvd: async () => undefined,
  primeEnvd: async () => undefined,
  initEnvd: async (address: string, init: unknown) => {
    inits.push({ address, init });
    return '9.9.9';
  },
  runStartCommand: async () => undefined,
};

const logger = pino({ level: 'silent' });

function fakeRuntime(startDelayMs = 0) {
  let next = 0;
  const started: ContainerSpec[] = [];
  const removed: string[] = [];
  const starting = { now: 0, most: 0 };
  const runtime = {
    startContainer: async (spec: ContainerSpec) => {
      started.push(spec);
      next += 1;
      const id = next;
      starting.now += 1;
      starting.most = Math.max(starting.most, starting.now);
      await new Promise((r) => setTimeout(r, startDelayMs));
      starting.now -= 1;
      return { containerId: `c${id}`, address: `10.0.0.${id}` };
    },
    inspect: async () => ({ status: 'running' as const, address: undefined }),
    remove: async (containerId: string) => {
      removed.push(containerId);
    },
  };
  return { runtime: runtime as unknown as SandboxRuntime, started, removed, starting };
}

/** Templates by reference → current build id; a missing reference resolves to not found. */
function templates(builds: Record<string, string>) {
  return {
    async resolve(reference: string): Promise<ResolvedTemplate> {
      const buildId = builds[reference];
      if (!buildId) throw new PlatformError('not_found', `template '${reference}' not found`);
      return {
        template: { templateId: `t-${reference}` },
        build: { buildId, image: `img-${buildId}`, cpuCount: 2, memoryMB: 512, defaults: { user: 'user', workdir: null, envs: { FROM_TEMPLATE: buildId } } },
        tag: 'default',
      } as unknown as ResolvedTemplate;
    },
  };
}

function slots(max: number) {
  let held = 0;
  return {
    held: () => held,
    reserve: () => {
      if (held >= max) throw new PlatformError('limit', 'full');
      held += 1;
      return () => {
        held -= 1;
      };
    },
  };
}

const pools: WarmPool[] = [];
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.stop();
});

interface PoolOptions {
  builds: Record<string, string>;
  targets: Record<string, number>;
  max?: number;
  busy?: () => boolean;
  holds?: (sandboxId: string, containerId: string) => boolean;
  adaptive?: AdaptiveSettings;
  parallel?: number;
  startDelayMs?: number;
  memoryAvailableMB?: () => number | undefined;
  now?: () => number;
  ensureImage?: (runtime: SandboxRuntime, image: string) => Promise<void>;
  teamSharePercent?: number;
}

function poolWith(options: PoolOptions) {
  const engine = fakeRuntime(options.startDelayMs);
  const limit = slots(options.max ?? 100);
  const pool = new WarmPool({
    runtime: engine.runtime,
    envd,
    templates: templates(options.builds),
    targets: options.targets,
    adaptive: options.adaptive,
    parallel: options.parallel,
    memoryAvailableMB: options.memoryAvailableMB,
    memoryReserveMB: 1000,
    freeSlots: () => (options.max ?? 100) - limit.held(),
    now: options.now,
    tokenSeed: 'seed',
    reserveSlot: limit.reserve,
    busy: options.busy ?? (() => false),
    holds: options.holds,
    ensureImage: options.ensureImage,
    teamSharePercent: options.teamSharePercent,
    logger,
    quietMs: 20,
    checkEveryMs: 10,
  });
  pools.push(pool);
  return { pool, engine, limit };
}

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('WarmPool', () => {
  it('fills each target, labels the containers with their key and gives each its own id and token', async () => {
    const { pool, engine, limit } = poolWith({ builds: { base: 'b1' }, targets: { base: 2 } });
    pool.start();
    await until(() => pool.stats().ready === 2);
    expect(engine.started.map((s) => s.pool)).toEqual(['b1/2/512', 'b1/2/512']);
    expect(engine.started[0].sandboxId).not.toBe(engine.started[1].sandboxId);
    expect(engine.started[0].envdAccessToken).not.toBe(engine.started[1].envdAccessToken);
    expect(engine.started[0].egress).toEqual({ allow: [], deny: [] });
    expect(limit.held()).toBe(2);
    expect(pool.keys()).toEqual([{ key: 'b1/2/512', reference: 'base', size: 2, reason: 'pinned' }]);
  });

  it('makes the image present on its node before each start; a failed pull starts nothing and frees its slot', async () => {
    const order: string[] = [];
    let pullFails = true;
    const { pool, engine, limit } = poolWith({
      builds: { base: 'b1' },
      targets: { base: 1 },
      ensureImage: async (_runtime, image) => {
        order.push(`ensure ${image}`);
        if (pullFails) throw new Error('registry unreachable');
      },
    });
    const startContainer = engine.runtime.startContainer.bind(engine.runtime);
    engine.runtime.startContainer = async (spec) => {
      order.push(`start ${spec.image}`);
      return startContainer(spec);
    };
    pool.start();
    await until(() => order.length >= 2);
    expect(engine.started).toEqual([]);
    expect(limit.held()).toBe(0);
    pullFails = false;
    await until(() => pool.stats().ready === 1);
    expect(order.slice(-2)).toEqual(['ensure img-b1', 'start img-b1']);
    expect(order.filter((o) => o.startsWith('start'))).toHaveLength(1);
  });

  it('hands out ready containers once, initialised, counts claims and empty-pool fallbacks, and refills', async () => {
    const { pool, limit, engine } = poolWith({ builds: { base: 'b1' }, targets: { base: 1 } });
    const waits: number[] = [];
    pool.onClaim = (seconds) => waits.push(seconds);
    pool.start();
    await until(() => pool.stats().ready === 1);
    const pooled = pool.take('b1/2/512')!;
    expect(pooled).toBeDefined();
    // envd was initialised as for a create without env vars of its own, with this container's own token.
    const token = engine.started[0].envdAccessToken;
    expect(pooled.initialised).toEqual({ init: { envVars: { FROM_TEMPLATE: 'b1' }, accessToken: token, defaultUser: 'user', defaultWorkdir: '' }, envdVersion: '9.9.9' });
    expect(inits.at(-1)).toEqual({ address: pooled.address, init: pooled.initialised.init });
    expect(pool.owns(pooled.sandboxId)).toBe(false);
    expect(pool.take('b1/2/512')).toBeUndefined();
    // Another size of the same build is not served, and not counted as a fallback of this pool.
    expect(pool.take('b1/4/512')).toBeUndefined();
    pool.claimed(pooled, 0.01);
    pooled.release();
    expect(pool.stats()).toMatchObject({ claimedTotal: 1, coldFallbacksTotal: 1 });
    expect(waits).toEqual([0.01]);
    await until(() => pool.stats().ready === 1);
    expect(limit.held()).toBe(1);
  });

  it("serves a team only its share of a key's ready containers until the pool replaced them; the rest stay for other teams", async () => {
    let busy = false;
    const { pool } = poolWith({ builds: { base: 'b1' }, targets: { base: 4 }, teamSharePercent: 50, busy: () => busy });
    pool.start();
    await until(() => pool.stats().ready === 4);
    // A burst of team a (refills held back meanwhile, as while creates are in flight) gets two; its next creates start cold.
    busy = true;
    expect(pool.take('b1/2/512', undefined, 'a')).toBeDefined();
    expect(pool.take('b1/2/512', undefined, 'a')).toBeDefined();
    expect(pool.take('b1/2/512', undefined, 'a')).toBeUndefined();
    expect(pool.stats()).toMatchObject({ ready: 2, coldFallbacksTotal: 1 });
    // Team b still finds the two that are left.
    expect(pool.take('b1/2/512', undefined, 'b')).toBeDefined();
    expect(pool.take('b1/2/512', undefined, 'b')).toBeDefined();
    // Once the pool refilled, team a is served from it again.
    busy = false;
    await until(() => pool.stats().ready === 4);
    expect(pool.take('b1/2/512', undefined, 'a')).toBeDefined();
  });

  it("takes back a container whose create was refused before touching it, first in line, its slot kept and the team's claim undone", async () => {
    const { pool, limit, engine } = poolWith({ builds: { base: 'b1' }, targets: { base: 2 }, teamSharePercent: 50 });
    pool.start();
    await until(() => pool.stats().ready === 2);
    const pooled = pool.take('b1/2/512', undefined, 'a')!;
    pool.putBack(pooled, 'a');
    expect(pool.stats().ready).toBe(2);
    expect(limit.held()).toBe(2);
    expect(engine.removed).toEqual([]);
    // Team a's share (one of two) is free again, and the same container is handed out next.
    expect(pool.take('b1/2/512', undefined, 'a')?.containerId).toBe(pooled.containerId);
  });

  it('reports claimed containers as in use while their sandbox holds them, and only when it can tell', async () => {
    const held = new Map<string, string>();
    const { pool } = poolWith({ builds: { base: 'b1' }, targets: { base: 2 }, holds: (sandboxId, containerId) => held.get(sandboxId) === containerId });
    pool.start();
    await until(() => pool.stats().ready === 2);
    expect(pool.stats().inUse).toBe(0);
    const first = pool.take('b1/2/512')!;
    const second = pool.take('b1/2/512')!;
    // Taken but not yet claimed (the claim may still fail): not in use.
    expect(pool.stats().inUse).toBe(0);
    for (const pooled of [first, second]) {
      held.set(pooled.sandboxId, pooled.containerId);
      pool.claimed(pooled, 0);
    }
    expect(pool.stats()).toMatchObject({ inUse: 2, claimedTotal: 2 });
    expect(pool.stats('b1/2/512').inUse).toBe(2);
    expect(pool.stats('other/1/1').inUse).toBe(0);
    // Killed, and paused to an image (the record no longer names the container): out of use, for good.
    held.delete(first.sandboxId);
    held.set(second.sandboxId, 'a-resumed-container');
    expect(pool.stats()).toMatchObject({ inUse: 0, claimedTotal: 2 });
    held.set(second.sandboxId, second.containerId);
    expect(pool.stats().inUse).toBe(0);

    const { pool: blind } = poolWith({ builds: { base: 'b1' }, targets: { base: 1 } });
    blind.start();
    await until(() => blind.stats().ready === 1);
    const pooled = blind.take('b1/2/512')!;
    blind.claimed(pooled, 0);
    expect(blind.stats().inUse).toBeUndefined();
  });

  it('waits while creations are in flight and when the sandbox limit is reached', async () => {
    let busy = true;
    const { pool, engine } = poolWith({ builds: { base: 'b1' }, targets: { base: 3 }, max: 2, busy: () => busy });
    pool.start();
    await new Promise((r) => setTimeout(r, 100));
    expect(engine.started).toHaveLength(0);
    busy = false;
    await until(() => pool.stats().ready === 2);
    await new Promise((r) => setTimeout(r, 100));
    expect(engine.started).toHaveLength(2);
  });

  it('drains a build that is no longer current and fills with the new one', async () => {
    const builds: Record<string, string> = { app: 'b1' };
    const { pool, engine, limit } = poolWith({ builds, targets: { app: 1 } });
    pool.start();
    await until(() => pool.stats().ready === 1);
    builds.app = 'b2';
    await until(() => engine.removed.length === 1 && pool.stats().ready === 1);
    expect(engine.removed).toEqual(['c1']);
    expect(pool.keys()[0].key).toBe('b2/2/512');
    delete builds.app;
    await until(() => engine.removed.length === 2);
    expect(pool.stats().ready).toBe(0);
    expect(limit.held()).toBe(0);
  });

  it('empties a template being removed and starts nothing of it until the removal ends', async () => {
    const { pool, engine } = poolWith({ builds: { app: 'b1' }, targets: { app: 2 } });
    pool.start();
    await until(() => pool.stats().ready === 2);
    const during = await pool.whileRemoving('t-app', async () => {
      await new Promise((r) => setTimeout(r, 100));
      return { ready: pool.stats().ready, started: engine.started.length };
    });
    expect(during).toEqual({ ready: 0, started: 2 });
    await until(() => pool.stats().ready === 2);
  });

  it('gives a slot to a cold start at the limit, forgets containers that died, and drains on stop', async () => {
    const { pool, engine, limit } = poolWith({ builds: { base: 'b1' }, targets: { base: 2 } });
    pool.start();
    await until(() => pool.stats().ready === 2);
    expect(pool.evictOne()).toBe(true);
    expect(limit.held()).toBe(1);
    expect(pool.lost('c2')).toBe(true);
    expect(pool.lost('nope')).toBe(false);
    await until(() => pool.stats().ready === 2);
    await pool.stop({ drain: true });
    expect(pool.stats().ready).toBe(0);
    expect(limit.held()).toBe(0);
    expect(new Set(engine.removed)).toEqual(new Set(['c1', 'c2', 'c3', 'c4']));
  });
});

/** What a create of `reference` at build `buildId` tells the pool (the lifecycle passes the same). */
function wantedOf(reference: string, buildId: string): PoolTemplate {
  return { key: `${buildId}/2/512`, reference, templateId: `t-${reference}`, image: `img-${buildId}`, cpuCount: 2, memoryMB: 512, defaults: { user: 'user', workdir: null, envs: {}, startCmd: null, readyCmd: null } };
}

/** `count` creates at once, as the lifecycle makes them: each takes a ready container when there is one. */
function burst(pool: WarmPool, wanted: PoolTemplate, count: number): number {
  let claimed = 0;
  for (let i = 0; i < count; i += 1) {
    const pooled = pool.take(wanted.key, wanted);
    if (pooled) {
      claimed += 1;
      pool.claimed(pooled, 0);
      pooled.release();
    }
  }
  return claimed;
}

describe('WarmPool, adaptive', () => {
  const MINUTE = 60_000;
  const adaptive = (floors: Record<string, number>, ceiling = 32): AdaptiveSettings => ({ floors, ceiling, periodMs: 10_000, idleMs: 5 * MINUTE });
  const clock = () => {
    let now = 1_700_000_000_000;
    return { now: () => now, advance: (ms: number) => void (now += ms) };
  };

  it('grows to a burst with bounded parallelism, serves the next burst from the pool, and shrinks to the floor when idle', async () => {
    const time = clock();
    const { pool, engine } = poolWith({ builds: { base: 'b1' }, targets: {}, adaptive: adaptive({ base: 2 }), parallel: 3, startDelayMs: 20, now: time.now });
    pool.start();
    await until(() => pool.stats().ready === 2);
    expect(pool.keys()).toEqual([{ key: 'b1/2/512', reference: 'base', size: 2, reason: 'floor' }]);
    const base = wantedOf('base', 'b1');
    expect(burst(pool, base, 10)).toBe(2);
    expect(pool.stats()).toMatchObject({ claimedTotal: 2, coldFallbacksTotal: 8 });
    await until(() => pool.stats().ready === 10);
    expect(pool.keys()[0]).toMatchObject({ size: 10, reason: 'demand' });
    expect(engine.starting.most).toBe(3);
    expect(pool.stats()).toMatchObject({ target: 10, wanted: 10, sizeChanges: { 'grow:floor': 1, 'grow:demand': 1 } });

    // A second burst of the same size, a minute later: all ten from the pool.
    time.advance(MINUTE);
    expect(burst(pool, base, 10)).toBe(10);
    expect(pool.stats()).toMatchObject({ claimedTotal: 12, coldFallbacksTotal: 8 });
    await until(() => pool.stats().ready === 10);

    // Idle for the window: back to the floor; the surplus ready containers are removed, their slots freed.
    const removedBefore = engine.removed.length;
    time.advance(5 * MINUTE + 10_000);
    await until(() => pool.stats().ready === 2);
    expect(engine.removed.length - removedBefore).toBe(8);
    expect(pool.keys()[0]).toMatchObject({ size: 2, reason: 'floor' });
    expect(pool.stats().sizeChanges).toMatchObject({ 'shrink:floor': 1 });
  });

  it('keeps templates demand brought until they idle, then none of theirs', async () => {
    const time = clock();
    const { pool, engine, limit } = poolWith({ builds: { base: 'b1', app: 'a1' }, targets: {}, adaptive: adaptive({}), now: time.now });
    pool.start();
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.keys()).toEqual([]);
    expect(burst(pool, wantedOf('app', 'a1'), 3)).toBe(0);
    await until(() => pool.stats().ready === 3);
    expect(engine.started.every((s) => s.templateId === 't-app' && s.image === 'img-a1')).toBe(true);
    time.advance(5 * MINUTE + 10_000);
    await until(() => pool.keys().length === 0 && pool.stats().ready === 0);
    expect(limit.held()).toBe(0);
  });

  it('does not adapt a pinned template, and a create naming a stale build brings nothing', async () => {
    const time = clock();
    const { pool, engine } = poolWith({ builds: { base: 'b1', app: 'a2' }, targets: { base: 1 }, adaptive: adaptive({ base: 5 }), now: time.now });
    pool.start();
    await until(() => pool.stats().ready === 1);
    burst(pool, wantedOf('base', 'b1'), 8);
    // `app` was rebuilt (a2) since this create resolved it (a1): its key is not kept.
    burst(pool, wantedOf('app', 'a1'), 4);
    await until(() => pool.stats().ready === 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(pool.keys()).toEqual([{ key: 'b1/2/512', reference: 'base', size: 1, reason: 'pinned' }]);
    expect(engine.started.filter((s) => s.image === 'img-a1')).toHaveLength(0);
  });

  it('grows only into free sandbox slots and memory above the reserve', async () => {
    const time = clock();
    const bySlots = poolWith({ builds: { base: 'b1' }, targets: {}, adaptive: adaptive({ base: 1 }), max: 4, now: time.now });
    bySlots.pool.start();
    await until(() => bySlots.pool.stats().ready === 1);
    burst(bySlots.pool, wantedOf('base', 'b1'), 20);
    await until(() => bySlots.pool.stats().ready === 4);
    expect(bySlots.pool.keys()[0]).toMatchObject({ size: 4, reason: 'sandbox_limit' });
    expect(bySlots.limit.held()).toBe(4);

    // A machine with the 1000 MiB reserve and room for 4 containers of 64 MiB; each container (pooled or claimed) takes its share.
    let engine: ReturnType<typeof fakeRuntime> | undefined;
    const alive = () => (engine ? engine.started.length - engine.removed.length : 0);
    const byMemory = poolWith({ builds: { base: 'b1' }, targets: {}, adaptive: adaptive({ base: 1 }), memoryAvailableMB: () => 1000 + 4 * 64 + 10 - 64 * alive(), startDelayMs: 10, now: time.now });
    engine = byMemory.engine;
    byMemory.pool.start();
    await until(() => byMemory.pool.stats().ready === 1);
    // The claimed one keeps its memory; the pool grows to the three the machine has room for, not to 20.
    burst(byMemory.pool, wantedOf('base', 'b1'), 20);
    await until(() => byMemory.pool.stats().ready === 3);
    await new Promise((r) => setTimeout(r, 150));
    expect(engine.started).toHaveLength(4);
    expect(byMemory.pool.stats()).toMatchObject({ ready: 3, warming: 0, wanted: 20, target: 3 });
    expect(byMemory.pool.keys()[0].reason).toBe('memory');
  });

  it('drains every container on stop, including ones still starting', async () => {
    const { pool, engine, limit } = poolWith({ builds: { base: 'b1' }, targets: {}, adaptive: adaptive({ base: 4 }), parallel: 4, startDelayMs: 100 });
    pool.start();
    await until(() => engine.started.length === 4);
    await pool.stop({ drain: true });
    expect(pool.stats()).toMatchObject({ ready: 0, warming: 0 });
    expect(new Set(engine.removed)).toEqual(new Set(['c1', 'c2', 'c3', 'c4']));
    expect(limit.held()).toBe(0);
  });
});
