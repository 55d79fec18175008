import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { SqliteDatabase } from '../../store/sqlite-database.ts';
import { type LaunchPlan, SandboxLifecycle } from './sandbox-lifecycle.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import { SandboxStore } from '../registry/sandbox-store.ts';
import { SandboxRegistry } from '../registry/sandbox-registry.ts';
import { SandboxSlots } from '../registry/sandbox-slots.ts';
import { SandboxCreations } from './sandbox-creations.ts';
import { NodeSet } from '../../nodes/node-set.ts';

// Sandboxes boot without a container or an envd; a case may hold the next boot back (`boot.next`).
const boot = { next: undefined as Promise<{ containerId: string; address: string; envdVersion: string }> | undefined };
const fakeBoot = {
  cold: () => boot.next ?? Promise.resolve({ containerId: 'c-new', address: '10.9.0.2', envdVersion: '0.6.13' }),
  claim: () => Promise.reject(new Error('no warm pool here')),
};
const envd = { initEnvd: async () => '0.6.13', readEnvdMetrics: () => Promise.reject(new Error('no envd to sample')) };

const defaults = { user: 'user', workdir: '/home/user', envs: {}, startCmd: null, readyCmd: null };
const settings = { teamId: 'team-a', timeoutSeconds: 60, autoPause: false, autoPauseMemory: false, autoResume: false, metadata: {}, envVars: {}, network: {}, allowInternetAccess: null, volumeMounts: [] };
const plan: LaunchPlan = {
  image: 'tidepool/base:latest',
  from: { templateId: 'base', buildId: 'b1', alias: 'base', cpuCount: 1, memoryMB: 512, diskSizeMB: 1024, envdVersion: '0.6.13', defaults },
  settings,
  event: 'created',
};

function fakeRuntime(overrides: Partial<SandboxRuntime> = {}): SandboxRuntime & { removed: string[] } {
  const removed: string[] = [];
  const runtime = {
    removed,
    prepare: async () => undefined,
    imageExists: async () => true,
    imageEnvdVersion: async () => '0.6.13',
    startContainer: async () => ({ containerId: 'c-new', address: '10.9.0.2' }),
    pause: async () => undefined,
    unpause: async () => undefined,
    commitSandbox: async () => 'img',
    commit: async () => 'img',
    tagImage: async () => undefined,
    remove: async (id: string) => void removed.push(id),
    removeImage: async () => undefined,
    claimSandboxImage: async () => 'img',
    removeSandboxImage: async () => undefined,
    inspect: async () => ({ status: 'running' as const, address: '10.9.0.2' }),
    listManaged: async () => [],
    listSandboxImages: async () => [],
    ...overrides,
  };
  return runtime as SandboxRuntime & { removed: string[] };
}

let dir: string;
let db: SqliteDatabase;
let store: SandboxStore;
const lines: Array<Record<string, unknown>> = [];
const logger = pino(
  { level: 'debug' },
  new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  }),
);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tidepool-lifecycle-'));
  db = SqliteDatabase.open(dir);
  store = new SandboxStore(db);
  lines.length = 0;
  boot.next = undefined;
});
afterEach(async () => {
  vi.useRealTimers();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

function lifecycleWith(runtime: SandboxRuntime, maxSandboxes = 10): SandboxLifecycle {
  const templates = { resolve: () => { throw new Error('unused'); }, recordSpawn: async () => undefined };
  const registry = new SandboxRegistry(store);
  return new SandboxLifecycle({ store, registry, slots: new SandboxSlots(registry, { maxSandboxes }), creations: new SandboxCreations(), boot: fakeBoot, envd, templates, nodes: NodeSet.single('local', runtime), tokenSeed: 'seed', defaultTimeoutSeconds: 15, logger });
}

describe('create rollback', () => {
  it('removes the container and frees the slot when the record cannot be saved', async () => {
    const runtime = fakeRuntime();
    const lifecycle = lifecycleWith(runtime, 1);
    const save = vi.spyOn(store, 'save').mockImplementationOnce(() => {
      throw new Error('disk full');
    });
    await expect(lifecycle.launch(plan)).rejects.toThrow('disk full');
    expect(runtime.removed).toEqual(['c-new']);
    expect(lifecycle.list()).toEqual([]);
    expect(await store.all()).toEqual([]);
    // The one slot is free again.
    save.mockRestore();
    const record = await lifecycle.launch(plan);
    expect(lifecycle.get(record.sandboxId)).toBeDefined();
    lifecycle.stop();
  });
});

describe('drain', () => {
  it('waits for a creation in flight, and gives up after its bound', async () => {
    const lifecycle = lifecycleWith(fakeRuntime());
    let finish!: () => void;
    boot.next = new Promise((resolve) => {
      finish = () => resolve({ containerId: 'c-slow', address: '10.9.0.3', envdVersion: '0.6.13' });
    });
    const launching = lifecycle.launch(plan);
    expect(await lifecycle.drain(50)).toBe(false);
    setTimeout(finish, 50);
    expect(await lifecycle.drain(5_000)).toBe(true);
    const record = await launching;
    expect(lifecycle.isCreating(record.sandboxId)).toBe(false);
    expect((await store.all()).map((r) => r.sandboxId)).toEqual([record.sandboxId]);
    lifecycle.stop();
  });
});

describe('timeout action backoff', () => {
  it('retries a failed timeout kill after 1, 2, 4 … 30 s, logging each attempt once', async () => {
    vi.useFakeTimers();
    let failing = true;
    const attempts: number[] = [];
    const runtime = fakeRuntime({
      remove: async () => {
        attempts.push(Date.now());
        if (failing) throw new Error('engine says no');
      },
      listManaged: async () => [{ containerId: 'c-old', sandboxId: 'iexpired', status: 'running', address: '10.9.0.4', unclaimed: false }],
    });
    const past = new Date(Date.now() - 1000).toISOString();
    store.save({
      sandboxId: 'iexpired', ...plan.from, state: 'running', containerId: 'c-old', address: '10.9.0.4', pausedImage: null,
      ...settings, startedAt: past, endAt: past, timeoutSeconds: 1, pausedAt: null, envdAccessToken: 't', trafficAccessToken: null, nodeId: 'local',
    } as SandboxRecord);
    const lifecycle = lifecycleWith(runtime);
    await lifecycle.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts).toHaveLength(1);
    const expected = [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000];
    for (const [index, delay] of expected.entries()) {
      // Not a moment before its delay (the 500 ms sweep does not retry it either)…
      await vi.advanceTimersByTimeAsync(delay - 1);
      expect(attempts).toHaveLength(index + 1);
      // …and right at it.
      await vi.advanceTimersByTimeAsync(1);
      expect(attempts).toHaveLength(index + 2);
    }
    const failures = lines.filter((l) => l.msg && String(l.msg).startsWith('timeout action failed'));
    expect(failures.map((l) => l.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(failures.every((l) => l.sandboxId === 'iexpired')).toBe(true);
    expect(failures.map((l) => l.retryInMs)).toEqual([...expected, 30_000]);
    failing = false;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(lifecycle.get('iexpired')).toBeUndefined();
    lifecycle.stop();
  });
});
