import type { Logger } from 'pino';
import type { LeaseStore } from '../store/lease-store.ts';
import { SweepLoop } from '../sweep-loop.ts';
import type { NodeSet } from './node-set.ts';
import type { NodeStore } from './node-store.ts';
import type { NodeCapacity, NodeRegistration } from './sandbox-node.ts';

/** How long one replica may take to reconcile a returning node before another may try. */
const RECONCILE_LEASE_MS = 120_000;

/**
 * A node run by this process (the embedded one; in-process test nodes): registers it, then heartbeats its capacity
 * until stopped. A node agent process (`tidepool node`) does the same through its own store handle.
 */
export class LocalNodeAgent {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: NodeStore,
    private readonly registration: Omit<NodeRegistration, 'capacity'>,
    private readonly capacity: () => NodeCapacity,
    private readonly logger: Logger,
  ) {}

  get nodeId(): string {
    return this.registration.nodeId;
  }

  async start(intervalMs: number): Promise<void> {
    await this.store.register({ ...this.registration, capacity: this.capacity() });
    this.timer = setInterval(() => {
      this.store.heartbeat(this.nodeId, this.capacity()).catch((error: unknown) => this.logger.warn({ err: error, nodeId: this.nodeId }, 'node heartbeat failed'));
    }, intervalMs);
    this.timer.unref();
  }

  /** Stops heartbeating (the node will be marked lost once its last heartbeat is old enough). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Heartbeats now (after a stop: the node comes back). */
  async beat(): Promise<void> {
    await this.store.heartbeat(this.nodeId, this.capacity());
  }
}

export interface NodeMonitorOptions {
  store: NodeStore;
  nodes: NodeSet;
  /** Named leases: one replica reconciles a returning node. */
  leases: LeaseStore;
  /** This replica (lease owner). */
  owner: string;
  lostAfterMs: number;
  /** Adopts what a returning node still runs that records name, removes what the platform forgot. */
  reconcile(nodeId: string): Promise<void>;
  /** Puts back what a restarted agent kept in memory (its sandboxes' egress rules and pushed secrets). */
  restarted?(nodeId: string): Promise<void>;
  /** Runs after every sweep, with the statuses taken in (remote nodes' warm pools are managed there). */
  afterSweep?(): Promise<void>;
  logger: Logger;
}

/**
 * Every replica sweeps the node table: nodes past the heartbeat deadline are marked lost (one replica makes each
 * change), every replica takes in the statuses and capacities, and a node heartbeating again after it was lost is
 * reconciled by the one replica that takes its lease, then placeable again.
 */
export class NodeMonitor {
  private readonly loop = new SweepLoop(
    () => this.sweepNow(),
    (error) => this.options.logger.error({ err: error }, 'node sweep failed'),
  );

  constructor(private readonly options: NodeMonitorOptions) {}

  start(intervalMs: number): void {
    this.loop.start(intervalMs);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One sweep (sweeps never overlap: a second call waits for the one running). */
  sweep(): Promise<void> {
    return this.loop.run();
  }

  private async sweepNow(): Promise<void> {
    const { store, nodes, logger } = this.options;
    for (const nodeId of await store.markLost(this.options.lostAfterMs)) {
      logger.warn({ nodeId, lostAfterSeconds: this.options.lostAfterMs / 1000 }, 'node stopped heartbeating; marked lost (its sandboxes with a container answer 404 until it returns)');
    }
    const { returning, added, restarted } = nodes.update(await store.list());
    for (const nodeId of added) await this.reconcileAdded(nodeId);
    for (const nodeId of returning) await this.reconcileReturning(nodeId);
    for (const nodeId of restarted) await this.restoreRestarted(nodeId);
    await this.options.afterSweep?.();
  }

  /** A node this API just built from its row (cluster mode): its sandboxes are adopted and its engine reconciled. */
  private reconcileAdded(nodeId: string): Promise<void> {
    return this.onceAcrossReplicas(`node-reconcile:${nodeId}`, nodeId, () => this.options.reconcile(nodeId), 'node joined; its sandboxes adopted', 'adopting the sandboxes of a new node failed');
  }

  /** A node whose agent restarted while ready: one replica (by lease) puts its sandboxes' egress state back. */
  private async restoreRestarted(nodeId: string): Promise<void> {
    const restarted = this.options.restarted;
    if (!restarted) return;
    await this.onceAcrossReplicas(`node-restarted:${nodeId}`, nodeId, () => restarted(nodeId), 'node agent restarted; its sandboxes\' egress rules and secrets put back', 'putting back the egress state of a restarted node agent failed');
  }

  /** Runs `work` in the replica that takes `lease` (the others skip it), logging how it ended. */
  private async onceAcrossReplicas(lease: string, nodeId: string, work: () => Promise<void>, done: string, failed: string): Promise<void> {
    const { leases, owner, logger } = this.options;
    if (!(await leases.acquire(lease, owner, RECONCILE_LEASE_MS))) return;
    try {
      await work();
      logger.info({ nodeId }, done);
    } catch (error) {
      logger.error({ err: error, nodeId }, failed);
    } finally {
      await leases.release(lease, owner);
    }
  }

  private reconcileReturning(nodeId: string): Promise<void> {
    const { store, nodes, logger } = this.options;
    return this.onceAcrossReplicas(
      `node-reconcile:${nodeId}`,
      nodeId,
      async () => {
        logger.info({ nodeId }, 'node is heartbeating again; reconciling its containers');
        await this.options.reconcile(nodeId);
        if (await store.transition(nodeId, 'returning', 'ready')) nodes.setStatus(nodeId, 'ready');
      },
      'node reconciled and ready again',
      'reconciling a returning node failed; retried at the next sweep',
    );
  }
}
