import type { Logger } from 'pino';
import { conflict, invalid, PlatformError } from '../errors.ts';
import type { RoutableSandbox, SandboxDirectory } from '../proxy/sandbox-directory.ts';
import type { DirectoryMount, SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import { startOnPlacedNode } from '../nodes/placed-start.ts';
import type { ResolvedTemplate } from '../templates/template-model.ts';
import { initEnvd } from '../envd/envd-client.ts';
import { bootSandbox, initFor } from './sandbox-boot.ts';
import { newSandboxId } from './sandbox-identity.ts';
import { MetricsRecorder } from './metrics-recorder.ts';
import { type MetricsSink, noMetrics, type SandboxOperation, timed } from '../observability/metrics-sink.ts';
import { type EgressTrustSource, hasTransforms, installEgressCa } from './egress-trust.ts';
import { egressProblemOn, nodesWithoutEgress, transformsUnavailable } from './egress-nodes.ts';
import { egressPolicy, egressUpdate, type NetworkUpdate } from './network-rules.ts';
import type { SandboxNetwork, SandboxRecord } from './sandbox-record.ts';
import { type SharedDatabase, type SlotRelease, SandboxRegistry } from './sandbox-registry.ts';
import { SandboxCacheSync } from './sandbox-cache-sync.ts';
import { ReplicaJanitor } from './replica-janitor.ts';
import type { EgressProxyGate } from './egress-proxy-gate.ts';
import { type EgressProxyRequest, parseEgressProxy } from './egress-proxy-settings.ts';
import type { SandboxStore } from './sandbox-store.ts';
import { SandboxTimers } from './sandbox-timers.ts';
import { reconcileAfterRestart } from './restart-reconcile.ts';
import { type LaunchPlan, newSandboxRecord, type SandboxSettings } from './sandbox-launch.ts';
import { type PauseResumeContext, pauseSandbox, resumeSandbox } from './sandbox-pause-resume.ts';
import { type SandboxVolumeMount, volumeMountsProblem } from './volume-mounts.ts';
import { claimPooled } from './pool-claim.ts';
import { poolKey } from './pool-settings.ts';
import type { PooledContainer } from './warm-pool.ts';
import type { NodePools } from './node-pools.ts';
import { ClusterImages } from '../nodes/cluster-images.ts';

export type { LaunchPlan, SandboxSettings };

export interface CreateSandboxInput extends Omit<SandboxSettings, 'volumeMounts'> {
  templateRef: string;
  /** `network.egressProxy` as validated by the route; admitted (resolved, password sealed) before anything is made. */
  egressProxy?: EgressProxyRequest;
  /** As requested: volumes by name. */
  volumeMounts: Array<{ name: string; path: string }>;
}

/** Where the lifecycle finds volumes (by name on create, by id whenever a container is made). */
export interface VolumeSource {
  /** The team's volumes by name, with the node each lives on (another team's name is unknown). */
  resolveNames(teamId: string, names: string[]): Promise<Array<{ volumeID: string; name: string; nodeId: string }>>;
  /** Keeps the volumes from being deleted until `release`; refuses volumes that no longer exist. */
  hold(volumeIDs: string[]): Promise<{ release(): void }>;
  /** The volume's directory as the engine of `nodeId` (its node) sees it. */
  hostDir(volumeID: string, nodeId: string): Promise<string>;
}

/** Where the lifecycle finds templates: resolution and spawn counting. */
export interface TemplateSource {
  /** The build `reference` means for `teamId`: its own templates, built-ins and public ones; anything else is not found. */
  resolve(reference: string, teamId: string): Promise<ResolvedTemplate>;
  recordSpawn(templateId: string): Promise<void>;
}

export interface LifecycleDeps {
  store: SandboxStore;
  templates: TemplateSource;
  /** The nodes sandboxes run on; every engine call for a sandbox goes to its node's runtime. */
  nodes: NodeSet;
  tokenSeed: string;
  maxSandboxes: number;
  /** Timeout of a sandbox resumed without one and without a usable timeout of its own. */
  defaultTimeoutSeconds: number;
  logger: Logger;
  /** Volumes for `volumeMounts`; without it a create that asks for any is refused. */
  volumes?: VolumeSource;
  /** Prometheus: operation durations and orphan cleanups (none: not reported). */
  platformMetrics?: MetricsSink;
  /** Ready containers creates are served from first (a pool per node: node-pools.ts); none = every create starts cold. */
  pools?: NodePools;
  /** Per-sandbox egress CAs for network.rules transforms over HTTPS (none: sandboxes are given no CA). */
  egressTrust?: EgressTrustSource;
  /** Admits `network.egressProxy` and keeps its password sealed; none = such sandboxes are refused. */
  egressProxies?: EgressProxyGate;
  /** The database other API replicas share (PostgreSQL): the store is the truth, the registry a cache of it. */
  shared?: SharedDatabase;
  /** Images through the cluster registry (pulled where missing, pushed when made); none = images stay where made. */
  images?: ClusterImages;
}

const nowIso = (): string => new Date().toISOString();
const inSeconds = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString();

/**
 * Owns every sandbox: creation, timeouts, pause/resume, kill and restart recovery. Operations on one
 * sandbox run one at a time (the registry serialises them).
 */
export class SandboxLifecycle implements SandboxDirectory {
  readonly registry: SandboxRegistry;
  private readonly timers: SandboxTimers;
  readonly metrics: MetricsRecorder;
  /** Creations in flight by sandbox id: their containers exist before their records do. */
  private readonly creating = new Map<string, Promise<SandboxRecord>>();

  /** What the pause and resume transitions (sandbox-pause-resume.ts) work with. */
  private readonly transitions: PauseResumeContext;
  /** Shared database: keeps the registry's cache fresh, and collects reservations of replicas that died. */
  private sync: SandboxCacheSync | undefined;
  private janitor: ReplicaJanitor | undefined;

  /** The cluster registry's images (a no-op without one). */
  readonly images: ClusterImages;

  constructor(private readonly deps: LifecycleDeps) {
    this.images = deps.images ?? new ClusterImages(undefined, deps.logger);
    this.registry = new SandboxRegistry(deps.store, deps.maxSandboxes, (record) => deps.nodes.lostReason(record, record.sandboxId) ?? this.undrivable(record), deps.shared);
    if (deps.shared) {
      this.lookup = async (sandboxId) => {
        await this.registry.ensure(sandboxId);
        return this.find(sandboxId);
      };
    }
    this.timers = new SandboxTimers((id) => this.expire(id));
    // Another replica changed a sandbox: its timer follows the stored end (every replica arms it; one acts on it).
    this.registry.onChange((id, record) => {
      if (record) this.timers.arm(record);
      else {
        this.timers.forget(id);
        this.metrics.forget(id);
      }
    });
    this.transitions = {
      registry: this.registry,
      nodes: deps.nodes,
      timers: this.timers,
      logger: deps.logger,
      defaultTimeoutSeconds: deps.defaultTimeoutSeconds,
      reserveSlot: (sandboxId) => this.reserveSlot(sandboxId, 'resume'),
      directoriesOf: (record) => this.directoriesOf(record),
      openProxyPassword: this.openProxyPassword,
      trustEgressCa: (record) => this.trustEgressCa(record),
      images: this.images,
    };
    this.metrics = new MetricsRecorder(() => this.registry.running(), deps.logger, (record) => deps.nodes.dialOf(record.nodeId));
  }

  /** Reports to the platform's metrics how long `operation` took and whether it failed. */
  private timed<T>(operation: SandboxOperation, work: () => Promise<T>): Promise<T> {
    const sink = this.deps.platformMetrics ?? noMetrics;
    return timed((outcome, seconds) => sink.sandboxOperation(operation, outcome, seconds), work);
  }

  /** Creations in flight (for the sandboxes-by-state gauge). */
  creatingCount(): number {
    return this.creating.size;
  }

  /** The nodes sandboxes run on. */
  get nodes(): NodeSet {
    return this.deps.nodes;
  }

  /** The engine of the sandbox's node. */
  private runtimeOf(record: SandboxRecord): SandboxRuntime {
    return this.deps.nodes.runtime(record.nodeId);
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
      this.janitor = new ReplicaJanitor({ reservations: this.registry.reservations, clean: (ids) => this.cleanAbandoned(ids), logger: this.deps.logger });
      this.janitor.start();
    }
  }

  /** Why a record is not served here: its node is one this API replica does not drive (another replica's own engine). */
  private undrivable(record: SandboxRecord): string | undefined {
    if (!this.deps.shared || this.deps.nodes.has(record.nodeId)) return undefined;
    // Paused to the registry: any node this replica drives can resume it.
    if (!record.containerId && this.images.movable(record.pausedImage)) return undefined;
    return `Sandbox "${record.sandboxId}" is not available through this API replica: its node "${record.nodeId}" is not driven by it`;
  }

  /** Shared database: resolves once changes committed before the call are in the cache (lists read after writes). */
  async caughtUp(): Promise<void> {
    await this.sync?.caughtUp();
  }

  /**
   * Replicas died with creates or filesystem resumes of these sandboxes in flight (their reservations expired):
   * whatever they left half-made on the nodes this API drives goes. No record: the container (the client never got
   * an answer). A record paused to its filesystem: a container the interrupted resume made. Otherwise nothing.
   */
  private async cleanAbandoned(sandboxIds: string[]): Promise<void> {
    const wanted = new Set(sandboxIds);
    for (const node of this.deps.nodes.all()) {
      const leftovers = (await node.runtime.listManaged()).filter((c) => wanted.has(c.sandboxId) && !this.creating.has(c.sandboxId));
      for (const container of leftovers) {
        await this.registry.serial(container.sandboxId, async () => {
          const record = this.registry.peek(container.sandboxId);
          if (record && !(record.state === 'paused' && record.pausedImage && record.nodeId === node.nodeId)) return;
          await node.runtime.remove(container.containerId);
          this.deps.platformMetrics?.orphansRemoved('container');
          this.log(container.sandboxId).warn({ nodeId: node.nodeId, containerId: container.containerId, resume: Boolean(record) }, 'removed a container an API replica left half-made when it stopped');
        });
      }
    }
  }

  /**
   * Makes one node's containers and the records naming it agree (after a restart, or when a lost node returns):
   * adopts what it still runs that records name, removes what the platform forgot, and puts egress rules in force again.
   */
  async reconcileNode(nodeId: string, stored?: SandboxRecord[]): Promise<void> {
    const records = (stored ?? (await this.registry.stored())).filter((r) => r.nodeId === nodeId && !this.creating.has(r.sandboxId));
    const runtime = this.deps.nodes.runtime(nodeId);
    await reconcileAfterRestart({ registry: this.registry, runtime, records, logger: this.deps.logger.child({ nodeId }), adopted: (r) => this.timers.arm(r), metrics: this.deps.platformMetrics, keep: (id) => this.creating.has(id) || Boolean(this.deps.pools?.owns(id)),
      // A node's pool containers are its pool holder's (maybe another replica: any remote node, and on a shared
      // database the embedded one too): the holder removes leftovers itself when it takes the pool.
      keepPooled: nodeId !== this.deps.nodes.embeddedId || this.deps.shared !== undefined });
    // Egress rules live in the records: they are put in force again (replacing what the host kept).
    for (const record of this.registry.all()) {
      if (record.nodeId !== nodeId || !record.address || !record.containerId) continue;
      await Promise.resolve()
        .then(() => runtime.applyEgress?.(record.sandboxId, record.address!, egressPolicy(record.network, this.openProxyPassword)))
        .catch((error: unknown) => this.log(record.sandboxId).error({ err: error, nodeId }, 'egress rules not re-applied'));
    }
  }

  /** `PUT /network`: new egress rules, in force at once (atomically) on a running or frozen container, kept for resumes. */
  async updateNetwork(id: string, update: NetworkUpdate): Promise<void> {
    this.require(id);
    const request = parseEgressProxy(update.egressProxy);
    const proxy = request ? await this.admitEgressProxy(request) : undefined;
    return this.withSandbox(id, async (record) => {
      const network = egressUpdate(record.network, update, proxy);
      const runtime = this.runtimeOf(record);
      await this.requireEgressOn(record.nodeId, network);
      const newlyTransformed = hasTransforms(network) && !hasTransforms(record.network);
      if (newlyTransformed && record.state === 'running' && record.address) {
        // The sandbox trusts its CA (and new processes are pointed at it) before any connection is terminated.
        await this.trustEgressCa({ ...record, network });
        await initEnvd(record.address, initFor({ ...record, network }), this.deps.nodes.dialOf(record.nodeId));
      }
      if (record.address && record.containerId) await runtime.applyEgress?.(record.sandboxId, record.address, egressPolicy(network, this.openProxyPassword));
      record.network = network;
      record.allowInternetAccess = update.allow_internet_access ?? null;
      await this.registry.persist(record, 'sandbox network updated');
      this.log(id).info({ allowOut: network.allowOut, denyOut: network.denyOut, egressProxy: network.egressProxy?.address ?? null }, 'sandbox egress rules updated');
    });
  }

  /** network.rules and egressProxy are refused (400) where they would not be applied (the sandbox's node), never accepted and ignored. */
  private async requireEgressOn(nodeId: string, network: SandboxNetwork): Promise<void> {
    const problem = await egressProblemOn(this.deps.nodes.node(nodeId), network, this.deps.egressTrust !== undefined);
    if (problem) throw this.deps.nodes.all().length === 1 && problem.message.startsWith('network.rules') ? transformsUnavailable() : problem;
  }

  /** The nodes a create with `network` must not be placed on (they cannot apply its rules); throws when that is all of them. */
  private egressExcluded(network: SandboxNetwork): Promise<Set<string>> {
    return nodesWithoutEgress(this.deps.nodes.all(), network, this.deps.egressTrust !== undefined);
  }

  /** A warm-pool container on `nodeId` becomes the record's sandbox. */
  private async claimOn(nodeId: string, record: SandboxRecord, pooled: PooledContainer, log: Logger) {
    const runtime = this.deps.nodes.runtime(nodeId);
    await this.requireEgressOn(nodeId, record.network);
    return claimPooled(runtime, record, pooled, log, this.openProxyPassword, this.deps.nodes.dialOf(nodeId));
  }

  /** A running sandbox with transforms trusts its own egress CA (idempotent: resumes and retries run it again). */
  private async trustEgressCa(record: SandboxRecord): Promise<void> {
    if (!this.deps.egressTrust || !hasTransforms(record.network) || !record.address) return;
    await installEgressCa(record.address, record.envdAccessToken, await this.deps.egressTrust.caCertificate(record.sandboxId), this.deps.nodes.dialOf(record.nodeId));
    this.log(record.sandboxId).debug('sandbox egress CA certificate installed');
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

  /** The sandbox's egress proxy password, opened for the dialer (never logged, never returned). */
  private readonly openProxyPassword = (sealed: string): string => {
    if (!this.deps.egressProxies) throw new PlatformError('internal', 'this platform keeps no secrets key: a sandbox egress proxy password cannot be opened');
    return this.deps.egressProxies.open(sealed);
  };

  private admitEgressProxy(request: EgressProxyRequest) {
    if (!this.deps.egressProxies) throw new PlatformError('invalid', 'network.egressProxy is not supported on this platform');
    return this.deps.egressProxies.admit(request);
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

  /** Bind mounts of the sandbox's volumes, as the engine of `nodeId` (where the container is made) sees them. */
  private async directoriesOf(record: SandboxRecord, nodeId = record.nodeId): Promise<DirectoryMount[]> {
    if (record.volumeMounts.length === 0) return [];
    const volumes = this.requireVolumes();
    return Promise.all(record.volumeMounts.map(async (m) => ({ source: await volumes.hostDir(m.volumeID, nodeId), target: m.path })));
  }

  /** Checks and resolves a create request's `volumeMounts` (no container exists yet), and the node they live on. */
  private async resolveMounts(teamId: string, requested: CreateSandboxInput['volumeMounts']): Promise<{ mounts: SandboxVolumeMount[]; nodeId?: string }> {
    if (requested.length === 0) return { mounts: [] };
    const problem = volumeMountsProblem(requested);
    if (problem) throw invalid(problem);
    const volumes = await this.requireVolumes().resolveNames(teamId, requested.map((m) => m.name));
    const nodes = new Set(volumes.map((v) => v.nodeId));
    if (nodes.size > 1) throw invalid(`volumes ${volumes.map((v) => `"${v.name}"`).join(', ')} live on different nodes (${[...nodes].join(', ')}); a sandbox can mount volumes of one node only`);
    return { mounts: requested.map((m, i) => ({ name: volumes[i].name, volumeID: volumes[i].volumeID, path: m.path })), nodeId: volumes[0].nodeId };
  }

  /** Sandboxes (running or paused, on a lost node too) started from any of these builds. */
  usingBuilds(buildIds: Set<string>): SandboxRecord[] {
    return this.registry.all().filter((r) => buildIds.has(r.buildId));
  }

  private log(id: string): Logger {
    return this.deps.logger.child({ sandboxId: id });
  }

  create(input: CreateSandboxInput): Promise<SandboxRecord> {
    return this.timed('create', () => this.createNow(input));
  }

  /** The warm pools creates are served from, if any (their stats feed the metrics). */
  get pools(): NodePools | undefined {
    return this.deps.pools;
  }

  private async createNow(input: CreateSandboxInput): Promise<SandboxRecord> {
    // Refused before anything is made when no node could apply them; the placed node is asked again before it starts one.
    if (hasTransforms(input.network)) await this.egressExcluded(input.network);
    const { egressProxy, ...settings } = input;
    const network = egressProxy ? { ...input.network, egressProxy: await this.admitEgressProxy(egressProxy) } : input.network;
    // Placement leaves out the nodes that cannot apply network.rules or egressProxy (node agents, today).
    const excluded = await this.egressExcluded(network);
    const { template, build } = await this.deps.templates.resolve(input.templateRef, input.teamId);
    const { mounts: volumeMounts, nodeId: volumesNode } = await this.resolveMounts(input.teamId, input.volumeMounts);
    if (volumesNode !== undefined && excluded.has(volumesNode)) await this.requireEgressOn(volumesNode, network);
    const record = await this.launchPooledOrCold(input.templateRef, {
      // Volumes live on one node's disk: the sandbox goes there.
      nodeId: volumesNode,
      excluded,
      image: build.image!,
      from: {
        templateId: template.templateId,
        buildId: build.buildId,
        alias: template.alias,
        cpuCount: build.cpuCount,
        memoryMB: build.memoryMB,
        diskSizeMB: build.diskSizeMB,
        envdVersion: build.envdVersion ?? '0.0.0',
        defaults: build.defaults,
      },
      settings: { ...settings, network, volumeMounts },
      event: `sandbox created from template ${template.templateId} (build ${build.buildId})`,
    });
    await this.deps.templates.recordSpawn(template.templateId);
    return record;
  }

  /**
   * A ready container of the same build, cpu and memory is claimed when the pool has one; otherwise, or
   * when the claim fails (the container is removed), the sandbox starts cold. Volume binds are fixed when a
   * container is created, so a create with volumes always starts cold (and is no demand for the pool).
   * `reference` is the template as the create named it: an adaptive pool keeps that reference's build warm.
   */
  private async launchPooledOrCold(reference: string, plan: LaunchPlan): Promise<SandboxRecord> {
    const pools = this.deps.pools;
    if (!pools || plan.settings.volumeMounts.length > 0) return this.launch(plan);
    // Pooled containers of a template with a start command already run it with the template's environment;
    // a create with env vars of its own needs it started with those, so it starts cold.
    const { startCmd, readyCmd } = plan.from.defaults;
    if ((startCmd || readyCmd) && Object.keys(plan.settings.envVars).length > 0) return this.launch(plan);
    const began = performance.now();
    const key = poolKey(plan.from);
    const { templateId, cpuCount, memoryMB, defaults } = plan.from;
    // The node placement picks (a ready pool container of the key weighs in its favour) serves the claim.
    const placement = this.deps.nodes.place({ cpuCount, memoryMB, image: plan.image, poolKey: key, exclude: plan.excluded }, this.registry.all());
    // A pooled container's memory is already taken: with no node to place on, the embedded node's pool still serves
    // (unless that node is drained, or cannot apply the sandbox's network rules).
    const embedded = this.deps.nodes.embeddedId;
    const embeddedServes = embedded !== undefined && this.deps.nodes.status(embedded) === 'ready' && !plan.excluded?.has(embedded);
    const nodeId = placement.kind === 'placed' ? placement.nodeId : embeddedServes ? embedded : undefined;
    const pool = nodeId === undefined ? undefined : pools.of(nodeId);
    const pooled = pool?.take(key, { key, reference, templateId, image: plan.image, cpuCount, memoryMB, defaults });
    if (!pool || !pooled) return this.launch(plan);
    try {
      const record = await this.launch({ ...plan, sandboxId: pooled.sandboxId, pooled, nodeId }, pooled.release);
      pool.claimed(pooled, (performance.now() - began) / 1000);
      return record;
    } catch (error) {
      pool.claimFailed(pooled);
      this.log(pooled.sandboxId).warn({ err: error, containerId: pooled.containerId }, 'warm-pool claim failed; starting a cold sandbox instead');
      return this.launch(plan);
    }
  }

  /** One slot under the sandbox limit; when none is free, a ready warm-pool container gives its slot up. */
  private async reserveSlot(sandboxId: string, kind: 'create' | 'resume'): Promise<SlotRelease> {
    try {
      return await this.registry.reserveFor(sandboxId, kind);
    } catch (error) {
      if (!(error instanceof PlatformError) || error.kind !== 'limit' || !this.deps.pools?.evictOne()) throw error;
      return this.registry.reserveFor(sandboxId, kind);
    }
  }

  /**
   * Starts a new sandbox from an image (a template build, a fork checkpoint); takes one slot (`poolSlot`: the warm-pool
   * container's, which a shared database still records as this replica's create).
   */
  launch(plan: LaunchPlan, poolSlot?: SlotRelease): Promise<SandboxRecord> {
    const sandboxId = plan.sandboxId ?? newSandboxId();
    // In flight from the call on (its slot may be taken in the store first): drain and reconcile wait for it.
    const launching = this.launchWithSlot({ ...plan, sandboxId }, poolSlot);
    this.creating.set(sandboxId, launching);
    return launching.finally(() => this.creating.delete(sandboxId));
  }

  private async launchWithSlot(plan: LaunchPlan & { sandboxId: string }, poolSlot: SlotRelease | undefined): Promise<SandboxRecord> {
    const { sandboxId } = plan;
    let release: SlotRelease;
    if (poolSlot) {
      try {
        const recorded = await this.registry.reserveFor(sandboxId, 'create', false);
        release = (howMany) => {
          poolSlot(howMany);
          recorded();
        };
      } catch (error) {
        poolSlot();
        throw error;
      }
    } else {
      release = await this.reserveSlot(sandboxId, 'create');
    }
    let held: { release(): void } | undefined;
    try {
      // Held from before the container exists until the record does, so a delete cannot race the creation.
      if (plan.settings.volumeMounts.length > 0) held = await this.requireVolumes().hold(plan.settings.volumeMounts.map((m) => m.volumeID));
    } catch (error) {
      release(1);
      throw error;
    }
    try {
      return await this.launchNow(plan, release);
    } finally {
      held?.release();
    }
  }

  private requireVolumes(): VolumeSource {
    if (!this.deps.volumes) throw invalid('volumes are not available on this platform');
    return this.deps.volumes;
  }

  /** True while the sandbox is being created (its container may exist without a record). */
  isCreating(sandboxId: string): boolean {
    return this.creating.has(sandboxId);
  }

  /** Waits for creations and per-sandbox operations in flight, at most `timeoutMs`; false when some were still running. */
  async drain(timeoutMs: number): Promise<boolean> {
    const pending = [...this.creating.values(), ...this.registry.inFlight()].map((p) => p.then(() => undefined, () => undefined));
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

  private async launchNow(plan: LaunchPlan, release: (howMany?: number) => void): Promise<SandboxRecord> {
    try {
      const sandboxId = plan.sandboxId ?? newSandboxId();
      const { settings, from } = plan;
      const record = newSandboxRecord(plan, sandboxId, this.deps.tokenSeed, plan.nodeId ?? this.deps.nodes.embeddedId ?? '');
      const log = this.log(sandboxId);
      const { result: booted, nodeId } = plan.pooled && plan.nodeId
        ? { result: await this.claimOn(plan.nodeId, record, plan.pooled, log), nodeId: plan.nodeId }
        : await startOnPlacedNode(
            this.deps.nodes,
            () => this.registry.all(),
            {
              cpuCount: record.cpuCount,
              memoryMB: record.memoryMB,
              image: plan.image,
              poolKey: poolKey(from),
              // A fork's checkpoint is on its source's node; volumes on the node whose disk holds them.
              requiredNode: plan.nodeId,
              exclude: plan.excluded,
            },
            async (node) => {
              await this.requireEgressOn(node.nodeId, settings.network);
              // A node that lacks the image pulls it from the registry; a failed pull fails this node only.
              await this.images.ensure(node.runtime, plan.image, log.child({ nodeId: node.nodeId }));
              return bootSandbox(node.runtime, { ...record, nodeId: node.nodeId }, plan.image, log.child({ nodeId: node.nodeId }), await this.directoriesOf(record, node.nodeId), this.deps.nodes.dialOf(node.nodeId), this.openProxyPassword);
            },
            log,
          );
      record.nodeId = nodeId;
      record.containerId = booted.containerId;
      record.address = booted.address;
      record.envdVersion = booted.envdVersion;
      try {
        await this.trustEgressCa(record);
      } catch (error) {
        await this.runtimeOf(record).remove(booted.containerId);
        this.deps.egressTrust?.forget(sandboxId);
        throw error;
      }
      // The timeout counts from the moment the sandbox is usable.
      record.startedAt = nowIso();
      record.endAt = inSeconds(settings.timeoutSeconds);
      try {
        await this.registry.persist(record, plan.event, true);
      } catch (error) {
        await this.runtimeOf(record).remove(booted.containerId);
        throw error;
      }
      this.timers.arm(record);
      log.info({ templateId: record.templateId, buildId: record.buildId, containerId: record.containerId, nodeId: record.nodeId, warmPool: Boolean(plan.pooled) }, plan.pooled ? 'sandbox created (claimed from the warm pool)' : 'sandbox created');
      return record;
    } finally {
      release(1);
    }
  }

  /** Runs `operation` on the sandbox after every earlier operation on it finished. */
  withSandbox<T>(id: string, operation: (record: SandboxRecord) => Promise<T>): Promise<T> {
    return this.registry.serial(id, async () => operation(this.registry.require(id)));
  }

  kill(id: string): Promise<void> {
    return this.withSandbox(id, async (record) => {
      await this.destroy(record);
      this.log(id).info('sandbox killed');
    });
  }

  /**
   * The engine says the sandbox's container died or vanished behind our back: the sandbox ends as if
   * killed, with `reason` in its log. Ignored when the container is no longer the sandbox's (paused to
   * the filesystem, killed, re-booted). Resolves true when the sandbox was removed.
   */
  containerLost(id: string, containerId: string, reason: string): Promise<boolean> {
    return this.registry.serial(id, async () => {
      const record = this.registry.get(id);
      if (!record || record.containerId !== containerId) return false;
      const { status } = await this.runtimeOf(record).inspect(containerId);
      if (status === 'running' || status === 'paused') return false;
      await this.registry.recordEvent(id, reason, 'error');
      this.log(id).warn({ containerId, reason, state: record.state }, 'sandbox container is gone; removing the sandbox');
      await this.destroy(record);
      return true;
    });
  }

  private async destroy(record: SandboxRecord): Promise<void> {
    this.timers.clear(record.sandboxId);
    const inRegistry = !record.containerId && this.images.movable(record.pausedImage) ? record.pausedImage! : undefined;
    if (inRegistry) {
      // Its filesystem is in the registry: the node that paused it may be gone (or not driven here), so its copies there are best effort.
      const log = this.log(record.sandboxId);
      const runtime = this.deps.nodes.has(record.nodeId) ? this.runtimeOf(record) : undefined;
      await runtime?.removeSandboxImage(record.sandboxId).catch((error: unknown) => log.warn({ err: error, nodeId: record.nodeId }, 'could not remove the paused image from its node'));
      await runtime?.removeImage(inRegistry).catch((error: unknown) => log.warn({ err: error, nodeId: record.nodeId }, 'could not untag the paused image on its node'));
    } else {
      const runtime = this.runtimeOf(record);
      if (record.containerId) await runtime.remove(record.containerId);
      await runtime.removeSandboxImage(record.sandboxId);
    }
    await this.registry.forget(record.sandboxId);
    // Once no record names it (best effort, logged).
    await this.images.forget(inRegistry);
    this.deps.egressTrust?.forget(record.sandboxId);
    this.metrics.forget(record.sandboxId);
    this.timers.forget(record.sandboxId);
  }

  /** `POST /timeout`: the sandbox now ends `seconds` from now (may shorten). */
  setTimeout(id: string, seconds: number): Promise<void> {
    return this.withSandbox(id, async (record) => {
      if (record.state !== 'running') throw conflict(`Sandbox "${id}" is not running`);
      record.endAt = inSeconds(Math.max(0, seconds));
      record.timeoutSeconds = Math.max(0, seconds);
      await this.registry.persist(record);
      this.timers.arm(record);
    });
  }

  /** `POST /refreshes` and connect: extend only, never shorten. */
  extend(id: string, seconds: number): Promise<SandboxRecord> {
    return this.withSandbox(id, async (record) => {
      if (record.state !== 'running') throw conflict(`Sandbox "${id}" is not running`);
      await this.extendTo(record, seconds);
      return record;
    });
  }

  private async extendTo(record: SandboxRecord, seconds: number): Promise<void> {
    const candidate = inSeconds(seconds);
    if (candidate <= record.endAt) return;
    record.endAt = candidate;
    await this.registry.persist(record);
    this.timers.arm(record);
  }

  pause(id: string, keepMemory: boolean): Promise<void> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'paused') throw conflict(`Sandbox "${id}" is already paused`);
      await this.timed('pause', () => this.pauseNow(record, keepMemory));
    });
  }

  private pauseNow(record: SandboxRecord, keepMemory: boolean): Promise<void> {
    return pauseSandbox(this.transitions, record, keepMemory);
  }

  /** `POST /resume`: 409 when running. Without a timeout the sandbox gets its own (create/last set) timeout again. */
  resume(id: string, timeoutSeconds: number | undefined): Promise<SandboxRecord> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'running') throw conflict(`Sandbox "${id}" is already running`);
      return this.timed('resume', () => this.resumeNow(record, timeoutSeconds));
    });
  }

  /** `POST /connect`: running → extend only; paused → resume. */
  connect(id: string, timeoutSeconds: number | undefined): Promise<{ record: SandboxRecord; resumed: boolean }> {
    return this.withSandbox(id, async (record) => {
      if (record.state === 'paused') return { record: await this.timed('resume', () => this.resumeNow(record, timeoutSeconds)), resumed: true };
      // Without a timeout (the SDK sends none unless asked) a running sandbox keeps the one it has.
      if (timeoutSeconds !== undefined) await this.extendTo(record, timeoutSeconds);
      return { record, resumed: false };
    });
  }

  private resumeNow(record: SandboxRecord, requestedTimeout: number | undefined): Promise<SandboxRecord> {
    return resumeSandbox(this.transitions, record, requestedTimeout);
  }

  /** Timer callback: the sandbox ran out of time. */
  private expire(id: string): Promise<void> {
    return this.registry
      .serial(id, async () => {
        const record = this.registry.get(id);
        if (!record || record.state !== 'running') return;
        if (Date.parse(record.endAt) > Date.now()) {
          this.timers.arm(record);
          return;
        }
        if (!this.timers.due(id)) return;
        // With several replicas on one database, exactly one acts on a timeout.
        if (!(await this.registry.claimTimeout(id))) {
          this.log(id).debug('another replica is acting on this timeout');
          return;
        }
        await this.registry.recordEvent(id, 'sandbox timeout reached');
        try {
          if (record.autoPause) await this.timed('pause', () => this.pauseNow(record, record.autoPauseMemory));
          else await this.destroy(record);
        } catch (error) {
          // Retried with a growing delay (not at every sweep); one log line per attempt.
          const { attempt, delayMs } = this.timers.failed(record);
          this.log(id).error({ err: error, attempt, retryInMs: delayMs }, `timeout action failed (attempt ${attempt}); retrying in ${delayMs / 1000} s`);
          return;
        }
        this.timers.forget(id);
        if (record.autoPause) await this.registry.releaseTimeout(id);
        this.log(id).info({ action: record.autoPause ? 'pause' : 'kill' }, 'sandbox timed out');
      })
      .catch((error: unknown) => this.log(id).error({ err: error }, 'timeout action failed'));
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

function routable(record: SandboxRecord, dial: RoutableSandbox['dial']): RoutableSandbox {
  return {
    dial,
    sandboxId: record.sandboxId,
    state: record.state,
    address: record.address ?? undefined,
    envdAccessToken: record.envdAccessToken,
    trafficAccessToken: record.trafficAccessToken,
    maskRequestHost: record.network.maskRequestHost,
    httpsPorts: record.network.httpsPorts ?? [],
    // A filesystem-only pause cold-boots on resume: like the reference, traffic may not wake it.
    autoResume: record.autoResume && record.pausedImage === null,
  };
}
