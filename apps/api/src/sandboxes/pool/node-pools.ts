import type { Logger } from 'pino';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';
import type { PoolStats } from '../../observability/metrics-sink.ts';
import type { LeaseStore } from '../../store/lease-store.ts';
import type { WarmPool } from './warm-pool.ts';

/** How long a replica's hold on a remote node's pool lasts without renewal (renewed at every node sweep). */
export const POOL_LEASE_MS = 30_000;

export interface NodePoolsDeps {
  /** A new (not started) pool keeping containers on `node`. */
  poolFor(node: SandboxNode): WarmPool;
  /** Named leases: one replica manages a remote node's pool at a time (`node-pool:<nodeId>`). */
  leases?: { store: LeaseStore; owner(): string };
  /**
   * True when a sandbox holds this id — a creation in flight here, or a record in the shared store (any replica's):
   * a claimed pool container keeps its pool label.
   */
  isSandbox(sandboxId: string): boolean | Promise<boolean>;
  logger: Logger;
}

/**
 * The warm pools of every node this API manages, one per node (each sized per template on its own node). On SQLite
 * the embedded node's pool is this process's own (`startOwn`). A remote node's pool — and on a shared database the
 * embedded node's too, since replicas may embed the same engine — is run by the one replica holding the lease
 * `node-pool:<nodeId>` (renewed at every node sweep): only that replica starts, claims and removes its containers,
 * and when it takes the lease it first removes pooled containers a previous holder left on the node. A replica
 * that loses the lease (or whose node is lost) stops that pool and removes its containers.
 */
export class NodePools {
  private readonly pools = new Map<string, WarmPool>();
  private stopped = false;
  /** Called after each successful claim with the seconds the create spent claiming (metrics). */
  onClaim?: (waitSeconds: number) => void;

  constructor(private readonly deps: NodePoolsDeps) {}

  /** The pool of `nodeId`, when this API manages one there. */
  of(nodeId: string): WarmPool | undefined {
    return this.pools.get(nodeId);
  }

  all(): WarmPool[] {
    return [...this.pools.values()];
  }

  /** Starts the pool of a node only this process drives (the embedded node on SQLite): no lease. */
  startOwn(node: SandboxNode): WarmPool {
    const pool = this.add(node);
    pool.start();
    return pool;
  }

  /**
   * At every node sweep: renews or takes the pool lease of every `ready` remote node and starts pools for the newly
   * held ones; pools of nodes no longer ready or whose lease another replica took are stopped and emptied.
   */
  async manage(nodes: Array<{ node: SandboxNode; ready: boolean }>): Promise<void> {
    const leases = this.deps.leases;
    if (!leases || this.stopped) return;
    for (const { node, ready } of nodes) {
      const name = `node-pool:${node.nodeId}`;
      const held = ready && (await leases.store.acquire(name, leases.owner(), POOL_LEASE_MS).catch(() => false));
      const pool = this.pools.get(node.nodeId);
      if (held && !pool && !this.stopped) {
        await this.removeLeftovers(node);
        this.add(node).start();
        this.deps.logger.info({ nodeId: node.nodeId }, 'managing the warm pool of a node');
      } else if (!held && pool) {
        this.pools.delete(node.nodeId);
        // A node that is not ready has no pool anywhere: whoever runs it when it is ready again takes the lease anew.
        if (!ready) await leases.store.release(name, leases.owner()).catch(() => undefined);
        this.deps.logger.info({ nodeId: node.nodeId, ready }, 'no longer managing the warm pool of a node; removing its containers');
        await pool.stop({ drain: true });
      }
    }
  }

  /** Ready containers per pool key on `nodeId` (placement's bonus), undefined when this API keeps no pool there. */
  readyByKey(nodeId: string): Record<string, number> | undefined {
    return this.pools.get(nodeId)?.readyByKey();
  }

  /** True while a container of this sandbox id is one of the pools' (warming or ready). */
  owns(sandboxId: string): boolean {
    return this.all().some((pool) => pool.owns(sandboxId));
  }

  /**
   * The engine of `nodeId` says a container died: when it was a ready one of that node's pool, it leaves the pool.
   * Another node's word is not taken for it (a node reports only its own containers).
   */
  lost(containerId: string, nodeId?: string): boolean {
    if (nodeId !== undefined) return this.pools.get(nodeId)?.lost(containerId) ?? false;
    return this.all().some((pool) => pool.lost(containerId));
  }

  /** Frees one slot under the sandbox limit: a ready container of any node goes. */
  evictOne(): boolean {
    return this.all().some((pool) => pool.evictOne());
  }

  /** The pools' counters added up (metrics). */
  stats(key?: string): PoolStats {
    const total: PoolStats = { ready: 0, warming: 0, claimedTotal: 0, coldFallbacksTotal: 0, target: 0, wanted: 0, sizeChanges: {} };
    for (const pool of this.all()) {
      const one = pool.stats(key);
      total.ready += one.ready;
      total.warming += one.warming;
      total.claimedTotal += one.claimedTotal;
      total.coldFallbacksTotal += one.coldFallbacksTotal;
      total.target! += one.target ?? 0;
      total.wanted! += one.wanted ?? 0;
      if (one.inUse !== undefined) total.inUse = (total.inUse ?? 0) + one.inUse;
      for (const [change, count] of Object.entries(one.sizeChanges ?? {})) total.sizeChanges![change] = (total.sizeChanges![change] ?? 0) + count;
    }
    return total;
  }

  /** Runs a template removal with none of the template's containers in any pool (see WarmPool.whileRemoving). */
  whileRemoving<T>(templateId: string, work: () => Promise<T>): Promise<T> {
    return this.all().reduce<() => Promise<T>>((inner, pool) => () => pool.whileRemoving(templateId, inner), work)();
  }

  /** Stops every pool (`drain`: their ready containers are removed) and gives the leases back. */
  async stop(options: { drain?: boolean } = {}): Promise<void> {
    this.stopped = true;
    await Promise.all(this.all().map((pool) => pool.stop(options)));
    const leases = this.deps.leases;
    if (leases) for (const nodeId of this.pools.keys()) await leases.store.release(`node-pool:${nodeId}`, leases.owner()).catch(() => undefined);
  }

  private add(node: SandboxNode): WarmPool {
    const pool = this.deps.poolFor(node);
    pool.onClaim = (waitSeconds) => this.onClaim?.(waitSeconds);
    this.pools.set(node.nodeId, pool);
    return pool;
  }

  /** Pooled containers on a node this replica just took the pool of: a previous holder's, unclaimable now. */
  private async removeLeftovers(node: SandboxNode): Promise<void> {
    try {
      for (const container of await node.runtime.listManaged()) {
        if (!container.pooled || (await this.deps.isSandbox(container.sandboxId))) continue;
        this.deps.logger.info({ nodeId: node.nodeId, sandboxId: container.sandboxId, containerId: container.containerId }, 'removing a warm-pool container a previous pool holder left');
        await node.runtime.remove(container.containerId);
      }
    } catch (error) {
      this.deps.logger.warn({ err: error, nodeId: node.nodeId }, 'could not remove the warm-pool containers a previous holder left');
    }
  }
}
