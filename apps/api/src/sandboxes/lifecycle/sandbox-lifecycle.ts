import { conflict } from '../../errors.ts';
import type { RoutableSandbox, SandboxDirectory } from '../../proxy/sandbox-directory.ts';
import type { NodeSet } from '../../nodes/node-set.ts';
import { MetricsRecorder } from '../metrics-recorder.ts';
import type { NetworkUpdate } from '../egress/network-rules.ts';
import type { SandboxNetwork, SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';
import type { SlotRelease } from '../registry/sandbox-slots.ts';
import { SandboxCacheSync } from '../registry/sandbox-cache-sync.ts';
import { ReplicaJanitor } from '../registry/replica-janitor.ts';
import { SandboxTimers } from './sandbox-timers.ts';
import { type LifecycleContext, type LifecycleDeps, type TemplateSource, type VolumeSource, sandboxLog, timedOperation, withSandbox } from './lifecycle-context.ts';
import { type CreateSandboxInput, createSandbox } from './sandbox-create.ts';
import { expireSandbox, extendTo, setSandboxTimeout } from './sandbox-expiry.ts';
import { type LaunchPlan, launchSandbox, reserveSlot, type SandboxSettings } from './sandbox-launch.ts';
import { egressExcluded, proxyPasswordOpener, trustEgressCa, updateNetwork } from '../egress/sandbox-network-update.ts';
import { pauseSandbox, resumeSandbox } from './sandbox-pause-resume.ts';
import { cleanAbandoned, reapplyEgress, reconcileNode } from './sandbox-reconcile.ts';
import { containerLost, destroySandbox } from './sandbox-removal.ts';
import { routable } from './sandbox-routing.ts';
import { directoriesOf } from '../sandbox-volume-binds.ts';
import { ClusterImages } from '../../nodes/cluster-images.ts';

export type { CreateSandboxInput, LaunchPlan, LifecycleDeps, SandboxSettings, TemplateSource, VolumeSource };

/**
 * Owns every sandbox: creation, timeouts, pause/resume, kill and restart recovery. Operations on one
 * sandbox run one at a time (the registry serialises them). Each transition lives in its own module
 * (sandbox-create, -launch, -network-update, -reconcile, -removal, -expiry, -pause-resume, -routing);
 * they share the context this holds.
 */
export class SandboxLifecycle implements SandboxDirectory {
  private readonly registry: SandboxRegistry;
  private readonly timers: SandboxTimers;
  readonly metrics: MetricsRecorder;

  /** What the transitions work with. */
  private readonly ctx: LifecycleContext;
  /** Shared database: keeps the registry's cache fresh, and collects reservations of replicas that died. */
  private sync: SandboxCacheSync | undefined;
  private janitor: ReplicaJanitor | undefined;

  /** The cluster registry's images (a no-op without one). */
  private readonly images: ClusterImages;

  constructor(private readonly deps: LifecycleDeps) {
    this.images = deps.images ?? new ClusterImages(undefined, deps.logger);
    this.registry = deps.registry;
    if (deps.shared) {
      this.lookup = async (sandboxId) => {
        await this.registry.ensure(sandboxId);
        return this.find(sandboxId);
      };
    }
    this.timers = new SandboxTimers((id) => expireSandbox(this.ctx, id));
    // Another replica changed a sandbox: its timer follows the stored end (every replica arms it; one acts on it).
    this.registry.onChange((id, record) => {
      if (record) this.timers.arm(record);
      else {
        this.timers.forget(id);
        this.metrics.forget(id);
      }
    });
    const openProxyPassword = proxyPasswordOpener(deps.egressProxies);
    this.metrics = new MetricsRecorder(() => this.registry.running(), deps.envd.readEnvdMetrics, deps.logger, (record) => deps.nodes.dialOf(record.nodeId));
    this.ctx = {
      deps,
      registry: this.registry,
      slots: deps.slots,
      timers: this.timers,
      metrics: this.metrics,
      images: this.images,
      creations: deps.creations,
      openProxyPassword,
      transitions: {
        registry: this.registry,
        nodes: deps.nodes,
        timers: this.timers,
        logger: deps.logger,
        defaultTimeoutSeconds: deps.defaultTimeoutSeconds,
        reserveSlot: (record) => reserveSlot(this.ctx, record.sandboxId, record.teamId, 'resume'),
        directoriesOf: (record) => directoriesOf(this.ctx, record),
        openProxyPassword,
        trustEgressCa: (record) => trustEgressCa(this.ctx, record),
        images: this.images,
        boot: deps.boot,
        envd: deps.envd,
      },
    };
  }

  /** Whether a sandbox created in the last few seconds has not been served its first exchange yet (first-use-tracker.ts). */
  awaitingFirstUse(): boolean {
    return this.deps.creations.awaitingFirstUse();
  }

  /** The nodes sandboxes run on. */
  get nodes(): NodeSet {
    return this.deps.nodes;
  }

  /**
   * Adopts what survived a restart on every node, then starts the timers and the metrics sampler. With a shared
   * database the cache is filled from the store and kept fresh first, and abandoned reservations are collected.
   */
  async start(): Promise<void> {
    const shared = this.deps.shared;
    if (shared) {
      this.sync = new SandboxCacheSync({ channel: shared.channel, store: this.deps.store, apply: (id, record) => this.registry.applyStored(id, record), held: () => this.registry.all().map((r) => r.sandboxId), logger: this.deps.logger });
      await this.sync.start();
    }
    const records = await this.registry.stored();
    for (const node of this.deps.nodes.all()) await this.reconcileNode(node.nodeId, records);
    this.timers.startSweep(() => this.registry.running());
    this.metrics.start();
    if (this.registry.reservations) {
      this.janitor = new ReplicaJanitor({ reservations: this.registry.reservations, clean: (ids) => cleanAbandoned(this.ctx, ids), logger: this.deps.logger });
      this.janitor.start();
    }
  }

  /** Shared database: resolves once changes committed before the call are in the cache (lists read after writes). */
  async caughtUp(): Promise<void> {
    await this.sync?.caughtUp();
  }

  /** Makes one node's containers and the records naming it agree (sandbox-reconcile.ts). */
  reconcileNode(nodeId: string, stored?: SandboxRecord[]): Promise<void> {
    return reconcileNode(this.ctx, nodeId, stored);
  }

  /** Puts one node's egress rules (and an agent's pushed secrets) back, e.g. after its agent restarted (sandbox-reconcile.ts). */
  reapplyEgress(nodeId: string): Promise<void> {
    return reapplyEgress(this.ctx, nodeId);
  }

  /** `PUT /network` (sandbox-network-update.ts). */
  updateNetwork(id: string, update: NetworkUpdate): Promise<void> {
    return updateNetwork(this.ctx, id, update);
  }

  /** The nodes a fork of a sandbox with `network` must not be placed on; throws when that is all of them (sandbox-network-update.ts). */
  egressExcluded(network: SandboxNetwork): Promise<Set<string>> {
    return egressExcluded(this.ctx, network);
  }

  async stop(): Promise<void> {
    this.timers.stopAll();
    this.metrics.stop();
    await this.janitor?.stop();
    await this.sync?.stop();
  }

  get(id: string): SandboxRecord | undefined {
    return this.registry.get(id);
  }

  require(id: string): SandboxRecord {
    return this.registry.require(id);
  }

  /** The team's sandbox; another team's answers exactly as a missing one (the same error, the same message). */
  requireOwned(id: string, teamId: string): SandboxRecord {
    return this.registry.require(id, teamId);
  }

  /** The team's sandboxes (running and paused). */
  listOf(teamId: string): SandboxRecord[] {
    return this.registry.list().filter((r) => r.teamId === teamId);
  }

  list(): SandboxRecord[] {
    return this.registry.list();
  }

  /** Sandboxes (running or paused, on a lost node too) that mount the volume; creations in flight hold their volumes themselves. */
  usingVolume(volumeID: string): string[] {
    return this.registry
      .all()
      .filter((r) => r.volumeMounts.some((m) => m.volumeID === volumeID))
      .map((r) => r.sandboxId);
  }

  create(input: CreateSandboxInput): Promise<SandboxRecord> {
    return timedOperation(this.ctx, 'create', () => createSandbox(this.ctx, input));
  }

  /** Starts a new sandbox from an image (a template build, a fork checkpoint): sandbox-launch.ts. */
  launch(plan: LaunchPlan, poolSlot?: SlotRelease): Promise<SandboxRecord> {
    return launchSandbox(this.ctx, plan, poolSlot);
  }

  /** True while the sandbox is being created (its container may exist without a record). */
  isCreating(sandboxId: string): boolean {
    return this.deps.creations.isCreating(sandboxId);
  }

  /** Waits for creations and per-sandbox operations in flight, at most `timeoutMs`; false when some were still running. */
  async drain(timeoutMs: number): Promise<boolean> {
    const pending = [...this.deps.creations.inFlight(), ...this.registry.inFlight()].map((p) => p.then(() => undefined, () => undefined));
    if (pending.length === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const done = await Promise.race([Promise.all(pending).then(() => true), expired]);
    clearTimeout(timer);
    if (!done) this.deps.logger.warn({ pending: pending.length, timeoutMs }, 'sandbox operations still running at shutdown; not waiting longer');
    return done;
  }

  /** Runs `operation` on the sandbox after every earlier operation on it finished. */
  withSandbox<T>(id: string, operation: (record: SandboxRecord) => Promise<T>): Promise<T> {
    return withSandbox(this.ctx, id, operation);
  }

  kill(id: string): Promise<void> {
    return this.withSandbox(id, async (record) => {
      await destroySandbox(this.ctx, record);
      sandboxLog(this.ctx, id).info('sandbox killed');
    });
  }

  /** The engine says the sandbox's container died or vanished: the sandbox ends as if killed (sandbox-removal.ts). */
  containerLost(id: string, containerId: string, reason: string): Promise<boolean> {
    return containerLost(this.ctx, id, containerId, reason);
  }

  /** `POST /timeout` (sandbox-expiry.ts). */
  setTimeout(id: string, seconds: number): Promise<void> {
    return setSandboxTimeout(this.ctx, id, seconds);
  }

  /** `POST /refreshes` and connect: extend only, never shorten. */
  extend(id: string, seconds: number): Promise<SandboxRecord> {
    return this.withSandbox(id, async (record) => {
      if (record.state !== 'running') throw conflict(`Sandbox "${id}" is not running`);
      await extendTo(this.ctx, record, seconds);
      return record;
    });
  }

  pause(id: string, keepMemory: boolean): Promise<void> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'paused') throw conflict(`Sandbox "${id}" is already paused`);
      await timedOperation(this.ctx, 'pause', () => pauseSandbox(this.ctx.transitions, record, keepMemory));
    });
  }

  /** `POST /resume`: 409 when running. Without a timeout the sandbox gets its own (create/last set) timeout again. */
  resume(id: string, timeoutSeconds: number | undefined): Promise<SandboxRecord> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'running') throw conflict(`Sandbox "${id}" is already running`);
      return this.resumeNow(record, timeoutSeconds);
    });
  }

  /** `POST /connect`: running → extend only; paused → resume. */
  connect(id: string, timeoutSeconds: number | undefined): Promise<{ record: SandboxRecord; resumed: boolean }> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'paused') return { record: await this.resumeNow(record, timeoutSeconds), resumed: true };
      // Without a timeout (the SDK sends none unless asked) a running sandbox keeps the one it has.
      if (timeoutSeconds !== undefined) await extendTo(this.ctx, record, timeoutSeconds);
      return { record, resumed: false };
    });
  }

  private resumeNow(record: SandboxRecord, requestedTimeout: number | undefined): Promise<SandboxRecord> {
    return timedOperation(this.ctx, 'resume', () => resumeSandbox(this.ctx.transitions, record, requestedTimeout));
  }

  /**
   * Kills every sandbox (platform shutdown without keeping sandboxes); with a shared database only those on this
   * process's own engine (the other replicas' and the node agents' sandboxes are not this replica's to end).
   */
  async killAll(): Promise<void> {
    const mine = this.list().filter((r) => !this.deps.shared || r.nodeId === this.deps.nodes.embeddedId);
    await Promise.all(mine.map((record) => this.kill(record.sandboxId).catch(() => undefined)));
  }

  // SandboxDirectory, for the proxy.

  find(sandboxId: string): RoutableSandbox | undefined {
    const record = this.registry.get(sandboxId);
    return record ? this.routable(record) : undefined;
  }

  /**
   * A sandbox `find` does not know yet: read through to the store (shared database only, at most once per id every
   * 2 s; alone on SQLite the map is the truth and a miss stays synchronous).
   */
  readonly lookup: ((sandboxId: string) => Promise<RoutableSandbox | undefined>) | undefined;

  served(sandboxId: string): void {
    this.deps.creations.served(sandboxId);
  }

  unavailableReason(sandboxId: string): string | undefined {
    return this.registry.unavailableReason(sandboxId);
  }

  *running(): Iterable<RoutableSandbox> {
    for (const record of this.registry.running()) yield this.routable(record);
  }

  /** Routing facts; streams of a node on another machine are opened through its dial. */
  private routable(record: SandboxRecord): RoutableSandbox {
    return routable(record, this.deps.nodes.dialOf(record.nodeId));
  }

  async resumeForTraffic(sandboxId: string): Promise<RoutableSandbox> {
    const record = this.registry.require(sandboxId);
    if (record.state === 'running') return this.routable(record);
    const { record: resumed } = await this.connect(sandboxId, undefined);
    return this.routable(resumed);
  }
}
