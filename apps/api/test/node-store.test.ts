import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { NodeMonitor } from '../src/nodes/node-monitor.ts';
import { NodeSet } from '../src/nodes/node-set.ts';
import { NodeStore } from '../src/nodes/node-store.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { LeaseStore } from '../src/store/lease-store.ts';
import { SandboxStore } from '../src/sandboxes/registry/sandbox-store.ts';
import { PlatformError } from '../src/errors.ts';
import { BACKENDS, StoreBackend } from './support/store-backends.ts';

// The nodes table on SQLite and on a throwaway PostgreSQL: registration, heartbeats, loss, replicas racing.

const capacity = (memoryMB = 8192) => ({ cpuCount: 4, memoryMB, memoryAvailableMB: memoryMB / 2, images: ['tidepool/base:latest'], poolReady: { base: 1 } });

describe.each(BACKENDS)('node store on %s', (kind) => {
  const backend = new StoreBackend(kind);
  afterAll(() => backend.dispose(), 60_000);

  it('registers, heartbeats and lists nodes; an unknown node may not heartbeat; a bad id is refused', async () => {
    const [db] = await backend.open();
    let now = 1_000_000;
    const store = new NodeStore(db!, () => now);
    await store.register({ nodeId: 'node-b', url: 'https://10.0.0.2:7443', version: '1.0.0', capacity: capacity() });
    await store.register({ nodeId: 'node-a', url: 'https://10.0.0.1:7443', version: '1.0.0', capacity: capacity() });
    now += 500;
    await store.heartbeat('node-a', capacity(4096));
    const a = await store.get('node-a');
    expect(a).toMatchObject({ nodeId: 'node-a', status: 'ready', lastHeartbeat: 1_000_500, capacity: { memoryMB: 4096, poolReady: { base: 1 } } });
    expect(typeof a!.lastHeartbeat).toBe('number');
    expect((await store.list()).map((n) => n.nodeId)).toEqual(['node-a', 'node-b']);
    await expect(store.heartbeat('forged', capacity())).rejects.toMatchObject({ kind: 'not_found', message: expect.stringContaining('forged') });
    expect(await store.get('forged')).toBeUndefined();
    await expect(store.register({ nodeId: "x'; DROP TABLE nodes; --", url: 'u', version: 'v', capacity: capacity() })).rejects.toBeInstanceOf(PlatformError);
    expect(await store.list()).toHaveLength(2);
    // A node reporting nonsense capacity (it would steer placement) is refused and changes nothing.
    for (const bad of [{ ...capacity(), memoryAvailableMB: Number.NaN }, { ...capacity(), cpuCount: -1 }, { ...capacity(), images: [42] }, { ...capacity(), poolReady: { base: 1.5 } }, null]) {
      await expect(store.heartbeat('node-a', bad as never)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringContaining('invalid capacity') });
    }
    await expect(store.register({ nodeId: 'node-c', url: 'u', version: 'v', capacity: { cpuCount: 1 } as never })).rejects.toMatchObject({ kind: 'invalid' });
    expect(await store.get('node-a')).toMatchObject({ capacity: { memoryMB: 4096 }, lastHeartbeat: 1_000_500 });
    expect(await store.get('node-c')).toBeUndefined();
  });

  it('marks lost only nodes past the deadline; one that heartbeats again is returning until reconciled; draining survives a re-register', async () => {
    const [db] = await backend.open();
    let now = 5_000_000;
    const store = new NodeStore(db!, () => now);
    await store.register({ nodeId: 'old', url: 'u1', version: 'v', capacity: capacity() });
    now += 20_000;
    await store.register({ nodeId: 'fresh', url: 'u2', version: 'v', capacity: capacity() });
    now += 15_000;
    expect(await store.markLost(30_000)).toEqual(['old']);
    expect(await store.markLost(30_000)).toEqual([]);
    expect((await store.get('old'))!.status).toBe('lost');
    expect((await store.get('fresh'))!.status).toBe('ready');
    await store.heartbeat('old', capacity());
    expect((await store.get('old'))!.status).toBe('returning');
    expect(await store.transition('old', 'returning', 'ready')).toBe(true);
    expect(await store.transition('old', 'returning', 'ready')).toBe(false);
    expect(await store.transition('fresh', 'ready', 'draining')).toBe(true);
    const firstRegistration = (await store.get('fresh'))!.registeredAt;
    await store.register({ nodeId: 'fresh', url: 'u3', version: 'v2', capacity: capacity() });
    // A new registration time: the replicas see that the agent restarted.
    expect(await store.get('fresh')).toMatchObject({ status: 'draining', url: 'u3', version: 'v2', registeredAt: new Date(now).toISOString() });
    expect((await store.get('fresh'))!.registeredAt).not.toBe(firstRegistration);
  });

  it('two replicas sweeping together: each lost node is reported by exactly one', async () => {
    const [first, second] = await backend.open(2);
    let now = 9_000_000;
    const writer = new NodeStore(first!, () => now);
    for (let i = 0; i < 12; i++) await writer.register({ nodeId: `n${i}`, url: `u${i}`, version: 'v', capacity: capacity() });
    now += 60_000;
    const replicas = [new NodeStore(first!, () => now), new NodeStore(second!, () => now)];
    const results = await Promise.all([...replicas, ...replicas].map((r) => r.markLost(30_000)));
    const reported = results.flat().sort();
    expect(reported).toEqual(Array.from({ length: 12 }, (_, i) => `n${i}`).sort());
    expect(new Set(reported).size).toBe(12);
  });

  it('a returning node is reconciled by exactly one of two replicas sweeping together, then ready; a failed reconcile leaves it returning', async () => {
    const [first, second] = await backend.open(2);
    let now = 20_000_000;
    await new NodeStore(first!, () => now).register({ nodeId: 'x', url: 'u', version: 'v', capacity: capacity() });
    now += 60_000;
    expect(await new NodeStore(first!, () => now).markLost(30_000)).toEqual(['x']);
    await new NodeStore(first!, () => now).heartbeat('x', capacity());
    const reconciled: string[] = [];
    let failing = true;
    const monitors = [first!, second!].map((db, i) => {
      const nodes = new NodeSet('x');
      nodes.add({ nodeId: 'x', runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('no')) });
      const monitor = new NodeMonitor({
        store: new NodeStore(db, () => now),
        nodes,
        leases: new LeaseStore(db),
        owner: `replica-${i}`,
        lostAfterMs: 30_000,
        reconcile: async (nodeId) => {
          reconciled.push(`${i}:${nodeId}`);
          // Long enough that the other replica's sweep reaches the lease while this one holds it.
          await new Promise((resolve) => setTimeout(resolve, 300));
          if (failing) throw new Error('engine unreachable');
        },
        logger: pino({ level: 'silent' }),
      });
      return { monitor, nodes };
    });
    await Promise.all(monitors.map((m) => m.monitor.sweep()));
    expect(reconciled).toHaveLength(1);
    expect((await new NodeStore(first!).get('x'))!.status).toBe('returning');
    failing = false;
    await Promise.all(monitors.map((m) => m.monitor.sweep()));
    expect(reconciled).toHaveLength(2);
    expect((await new NodeStore(first!).get('x'))!.status).toBe('ready');
    await Promise.all(monitors.map((m) => m.monitor.sweep()));
    expect(reconciled).toHaveLength(2);
    expect(monitors.map((m) => m.nodes.status('x'))).toEqual(['ready', 'ready']);
  });

  it('a node row this API does not run is built with the factory once and its sandboxes adopted by one replica', async () => {
    const [first, second] = await backend.open(2);
    await new NodeStore(first!).register({ nodeId: 'remote-1', url: 'https://198.18.0.10:7443', version: 'v', capacity: capacity() });
    const adopted: string[] = [];
    const built: string[] = [];
    const monitors = [first!, second!].map((db, i) => {
      const nodes = new NodeSet('embedded', { nodeFor: (row) => (built.push(`${i}:${row.nodeId}`), { nodeId: row.nodeId, runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('no')) }) });
      return new NodeMonitor({
        store: new NodeStore(db),
        nodes,
        leases: new LeaseStore(db),
        owner: `replica-${i}`,
        lostAfterMs: 30_000,
        reconcile: async (nodeId) => {
          adopted.push(nodeId);
          await new Promise((resolve) => setTimeout(resolve, 300));
        },
        logger: pino({ level: 'silent' }),
      });
    });
    await Promise.all(monitors.map((m) => m.sweep()));
    await Promise.all(monitors.map((m) => m.sweep()));
    expect(built.sort()).toEqual(['0:remote-1', '1:remote-1']);
    expect(adopted).toEqual(['remote-1']);
  });

  it('sandbox rows carry their node; rows from before nodes existed are given the embedded node', async () => {
    const [db] = await backend.open();
    await db!.run(
      `INSERT INTO sandboxes (sandbox_id, template_id, state, started_at, end_at, timeout_seconds, cpu_count, memory_mb, disk_size_mb,
        envd_version, envd_access_token, metadata, env_vars, network, auto_pause, auto_pause_memory, auto_resume)
       VALUES ('iold', 'base', 'running', 's', 'e', 1, 1, 512, 0, '0.1', 't', '{}', '{}', '{}', 0, 0, 0)`,
    );
    const sandboxes = new SandboxStore(db!);
    expect((await sandboxes.get('iold'))!.nodeId).toBe('');
    expect(await sandboxes.assignUnplaced('embedded-1')).toBe(1);
    expect(await sandboxes.assignUnplaced('embedded-2')).toBe(0);
    expect((await sandboxes.get('iold'))!.nodeId).toBe('embedded-1');
  });
});
