import type { Logger } from 'pino';
import type { NodeSet } from '../../nodes/node-set.ts';
import type { ClusterImages } from '../../nodes/cluster-images.ts';
import { type MetricsSink, noMetrics, type SandboxOperation, timed } from '../../observability/metrics-sink.ts';
import type { ResolvedTemplate } from '../../templates/template-model.ts';
import type { EgressProxyGate } from '../egress/egress-proxy-gate.ts';
import type { EgressTrustSource } from '../egress/egress-trust.ts';
import type { MetricsRecorder } from '../metrics-recorder.ts';
import type { NodePools } from '../pool/node-pools.ts';
import type { PauseResumeContext } from './sandbox-pause-resume.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxRegistry, SharedDatabase } from '../registry/sandbox-registry.ts';
import type { SandboxSlots } from '../registry/sandbox-slots.ts';
import type { EnvdCalls } from '../envd-calls.ts';
import type { SandboxBoot } from './boot-calls.ts';
import type { SandboxCreations } from './sandbox-creations.ts';
import type { SandboxStore } from '../registry/sandbox-store.ts';
import type { SandboxTimers } from './sandbox-timers.ts';

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
  /** The sandboxes held (made in the composition root and shared with the pools, the engine watch and the routes). */
  registry: SandboxRegistry;
  /** The slots under the sandbox limits (shared with the warm pools, whose containers hold slots too). */
  slots: SandboxSlots;
  /** Creations in flight and new sandboxes awaiting their first use (the pools and the engine watch read them). */
  creations: SandboxCreations;
  /** How containers become sandboxes (cold boot, warm-pool claim): sandboxBoot(real envd calls) in the platform. */
  boot: SandboxBoot;
  /** The envd calls the lifecycle makes itself: `/init` again (a thaw, a network update) and resource samples. */
  envd: Pick<EnvdCalls, 'initEnvd' | 'readEnvdMetrics'>;
  templates: TemplateSource;
  /** The nodes sandboxes run on; every engine call for a sandbox goes to its node's runtime. */
  nodes: NodeSet;
  tokenSeed: string;
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

/** What the lifecycle's transitions (create, network update, reconcile, removal, expiry) work with; the lifecycle holds it. */
export interface LifecycleContext {
  deps: LifecycleDeps;
  registry: SandboxRegistry;
  slots: SandboxSlots;
  timers: SandboxTimers;
  metrics: MetricsRecorder;
  /** The cluster registry's images (a no-op without one). */
  images: ClusterImages;
  /** Creations in flight (their containers exist before their records do) and new sandboxes awaiting their first use. */
  creations: SandboxCreations;
  /** What the pause and resume transitions (sandbox-pause-resume.ts) work with. */
  transitions: PauseResumeContext;
  /** The sandbox's egress proxy password, opened for the dialer (never logged, never returned). */
  openProxyPassword: (sealed: string) => string;
}

export function sandboxLog(ctx: LifecycleContext, id: string): Logger {
  return ctx.deps.logger.child({ sandboxId: id });
}

/** Reports to the platform's metrics how long `operation` took and whether it failed. */
export function timedOperation<T>(ctx: LifecycleContext, operation: SandboxOperation, work: () => Promise<T>): Promise<T> {
  const sink = ctx.deps.platformMetrics ?? noMetrics;
  return timed((outcome, seconds) => sink.sandboxOperation(operation, outcome, seconds), work);
}

/** Runs `operation` on the sandbox after every earlier operation on it finished. */
export function withSandbox<T>(ctx: LifecycleContext, id: string, operation: (record: SandboxRecord) => Promise<T>): Promise<T> {
  return ctx.registry.serial(id, async () => operation(ctx.registry.require(id)));
}
