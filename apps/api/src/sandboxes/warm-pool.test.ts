import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PlatformError } from '../errors.ts';
import type { ContainerSpec, SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { ResolvedTemplate } from '../templates/template-model.ts';
import { WarmPool } from './warm-pool.ts';

// No envd behind the fake containers: health, the priming command and /init succeed at once.
const inits = vi.hoisted(() => [] as Array<{ address: string; init: unknown }>);
vi.mock('../envd/envd-client.ts', () => ({
  waitForEnvd: async () => undefined,
  initEnvd: async (address: string, init: unknown) => {
    inits.push({ address, init });
    return '9.9.9';
  },
}));
vi.mock('./pool-prime.ts', () => ({ primeEnvd: async () => undefined }));

const logger = pino({ level: 'silent' });

function fakeRuntime() {
  let next = 0;
  const started: ContainerSpec[] = [];
  const removed: string[] = [];
  const runtime = {
    startContainer: async (spec: ContainerSpec) => {
      started.push(spec);
      next += 1;
      return { containerId: `c${next}`, address: `10.0.0.${next}` };
    },
    inspect: async () => ({ status: 'running' as const, address: undefined }),
    remove: async (containerId: string) => {
      removed.push(containerId);
    },
  };
  return { runtime: runtime as unknown as SandboxRuntime, started, removed };
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

function poolWith(options: { builds: Record<string, string>; targets: Record<string, number>; max?: number; busy?: () => boolean; holds?: (sandboxId: string, containerId: string) => boolean }) {
  const engine = fakeRuntime();
  const limit = slots(options.max ?? 100);
  const pool = new WarmPool({
    runtime: engine.runtime,
    templates: templates(options.builds),
    targets: options.targets,
    tokenSeed: 'seed',
    reserveSlot: limit.reserve,
    busy: options.busy ?? (() => false),
    holds: options.holds,
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
    expect(pool.keys()).toEqual([{ key: 'b1/2/512', reference: 'base', size: 2 }]);
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
