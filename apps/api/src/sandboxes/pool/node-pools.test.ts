import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';
import type { ManagedContainer, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { LeaseStore } from '../../store/lease-store.ts';
import { SqliteDatabase } from '../../store/sqlite-database.ts';
import { NodePools } from './node-pools.ts';
import type { WarmPool } from './warm-pool.ts';

const logger = pino({ level: 'silent' });
let dir: string;
let db: SqliteDatabase;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tp-node-pools-'));
  db = SqliteDatabase.open(dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A node whose engine lists `containers` and records what is removed. */
function node(nodeId: string, containers: ManagedContainer[]): SandboxNode & { removed: string[]; containers: ManagedContainer[] } {
  const removed: string[] = [];
  const runtime = {
    listManaged: async () => containers.filter((c) => !removed.includes(c.containerId)),
    remove: async (containerId: string) => {
      removed.push(containerId);
    },
  } as unknown as SandboxRuntime;
  return { nodeId, runtime, dial: () => Promise.reject(new Error('no dial')), removed, containers };
}

/** A stand-in pool recording its life (the pool itself is warm-pool.test.ts's). */
function fakePool(log: string[], nodeId: string, owner: string): WarmPool {
  return {
    start: () => log.push(`${owner} start ${nodeId}`),
    stop: async (options: { drain?: boolean } = {}) => {
      log.push(`${owner} stop ${nodeId}${options.drain ? ' drained' : ''}`);
    },
    readyByKey: () => ({ k: 1 }),
  } as unknown as WarmPool;
}

function replica(owner: string, log: string[], sandboxes: Set<string> = new Set()): NodePools {
  const leases = new LeaseStore(db);
  return new NodePools({ poolFor: (n) => fakePool(log, n.nodeId, owner), leases: { store: leases, owner: () => owner }, isSandbox: (id) => sandboxes.has(id), logger });
}

const container = (sandboxId: string, pooled: boolean): ManagedContainer => ({ containerId: `c-${sandboxId}`, sandboxId, status: 'running', address: '10.0.0.2', unclaimed: false, pooled });

describe('NodePools: one replica runs a remote node\'s pool at a time', () => {
  it('the lease holder runs the pool; another replica does not; it takes over once the holder lets go', async () => {
    const log: string[] = [];
    const n2 = node('n2', [container('claimed', true), container('plain', false)]);
    // 'claimed' is a sandbox in the shared store: neither replica removes it.
    const a = replica('a', log, new Set(['claimed']));
    const b = replica('b', log, new Set(['claimed']));
    await a.manage([{ node: n2, ready: true }]);
    // a's pool warms a container; a stops being able to renew (crash): b must clean it up when it takes over.
    n2.containers.push(container('left-by-a', true));
    await b.manage([{ node: n2, ready: true }]);
    expect(a.readyByKey('n2')).toEqual({ k: 1 });
    expect(b.of('n2')).toBeUndefined();
    expect(b.readyByKey('n2')).toBeUndefined();
    // Renewal keeps it from b; the node going not-ready makes the holder stop and drain its pool and release the lease.
    await a.manage([{ node: n2, ready: true }]);
    await b.manage([{ node: n2, ready: true }]);
    expect(b.of('n2')).toBeUndefined();
    await a.manage([{ node: n2, ready: false }]);
    expect(a.of('n2')).toBeUndefined();
    await b.manage([{ node: n2, ready: true }]);
    expect(b.of('n2')).toBeDefined();
    // b removed the pooled container a left (no record), not the claimed one nor a non-pooled one.
    expect(n2.removed).toEqual(['c-left-by-a']);
    expect(log).toEqual(['a start n2', 'a stop n2 drained', 'b start n2']);
    await b.stop({ drain: true });
  });

  it('the embedded node\'s pool starts without a lease; stats add up over nodes', async () => {
    const log: string[] = [];
    const pools = new NodePools({
      poolFor: (n) => Object.assign(fakePool(log, n.nodeId, 'x'), { stats: () => ({ ready: 2, warming: 1, claimedTotal: 3, coldFallbacksTotal: 0, target: 2, wanted: 0, sizeChanges: { 'grow:pinned': 1 } }) }),
      isSandbox: () => false,
      logger,
    });
    pools.startOwn(node('e', []));
    await pools.manage([{ node: node('r', []), ready: true }]);
    expect(pools.of('r')).toBeUndefined();
    expect(pools.stats()).toMatchObject({ ready: 2, warming: 1, claimedTotal: 3, target: 2, sizeChanges: { 'grow:pinned': 1 } });
    expect(log).toEqual(['x start e']);
  });
  it("a died container leaves the pool of the node that reported it, never another node's", () => {
    const ready = new Map([['e', new Set(['c-e1'])], ['f', new Set(['c-f1'])]]);
    const pools = new NodePools({
      poolFor: (n) => Object.assign(fakePool([], n.nodeId, 'x'), { lost: (containerId: string) => ready.get(n.nodeId)!.delete(containerId) }),
      isSandbox: () => false,
      logger,
    });
    pools.startOwn(node('e', []));
    pools.startOwn(node('f', []));
    expect(pools.lost('c-f1', 'e')).toBe(false);
    expect(ready.get('f')).toEqual(new Set(['c-f1']));
    expect(pools.lost('c-f1', 'f')).toBe(true);
    expect(pools.lost('c-e1')).toBe(true);
  });
});
