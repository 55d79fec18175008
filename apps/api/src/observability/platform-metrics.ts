import { apiVersion } from './api-version.ts';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import {
  type MetricsSink,
  ORPHAN_KINDS,
  type OrphanKind,
  type Outcome,
  type PoolStatsSource,
  SANDBOX_OPERATIONS,
  type SandboxOperation,
} from './metrics-sink.ts';

/** Every metric name starts with this (process and Node.js default metrics too). */
export const METRIC_PREFIX = 'tidepool_';

/** Sandbox operations and builds: 10 ms to 5 min. */
export const OPERATION_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** Proxied exchanges start below a millisecond (a refused route) and may stream for minutes. */
export const PROXY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** A claim from a warm pool should take milliseconds; the top buckets show a pool that makes creates wait. */
export const CLAIM_WAIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Reasons the proxy answers an error itself (proxy-errors.ts); counted from zero so rates exist before the first one. */
export const PROXY_ERROR_REASONS = [
  'invalid_route',
  'bad_request',
  'control_route',
  'sandbox_not_found',
  'port_not_open',
  'invalid_upstream_response',
  'upstream_timeout',
  'traffic_token_missing',
  'traffic_token_invalid',
  'envd_unauthorized',
  'resume_forbidden',
  'still_transitioning',
  'resume_limited',
  'sandbox_connection_limit',
  'client_connection_limit',
] as const;

export const SANDBOX_STATES = ['creating', 'running', 'paused'] as const;
export type SandboxStateCount = Record<(typeof SANDBOX_STATES)[number], number>;

/** The node statuses of the cluster (nodes/node-store.ts), each a series of tidepool_cluster_node_status. */
export const NODE_STATUSES = ['ready', 'draining', 'lost', 'returning'] as const;

/** One node as this replica reports it. */
export interface NodeGaugeValues {
  nodeId: string;
  status: string;
  heartbeatAgeSeconds: number;
  sandboxes: number;
}

/**
 * The nodes' gauges, read at scrape time: undefined when another replica reports them (each node is reported by
 * exactly one replica of the cluster, so a sum over every replica's scrape counts each node once).
 */
export type NodeGaugeSource = () => Promise<NodeGaugeValues[] | undefined>;

/** What the scrape-time gauges read. */
export interface MetricsSources {
  /** Sandboxes the platform holds now, by state. */
  sandboxes(): SandboxStateCount;
  /** TIDEPOOL_MAX_SANDBOXES. */
  maxSandboxes: number;
}

const OUTCOMES: Outcome[] = ['success', 'error'];

/**
 * Every metric of the platform, defined in this one place (names, help, labels, buckets), kept in a registry of
 * its own (several platforms may run in one process, as in tests). It is the MetricsSink the domain reports to;
 * gauges of state (sandboxes, pool) are read from their sources when scraped.
 */
export class PlatformMetrics implements MetricsSink {
  readonly registry = new Registry();
  private sources: MetricsSources | undefined;
  private pool: PoolStatsSource | undefined;
  private nodes: NodeGaugeSource | undefined;
  private nodeValues: NodeGaugeValues[] | undefined;

  private readonly sandboxOperationSeconds: Histogram<'operation' | 'outcome'>;
  private readonly buildSeconds: Histogram<'outcome'>;
  private readonly proxyRequestSeconds: Histogram<'status_class'>;
  private readonly proxyErrors: Counter<'reason'>;
  private readonly engineErrors: Counter<'operation'>;
  private readonly orphans: Counter<'kind'>;
  private readonly claimWaitSeconds: Histogram;

  constructor() {
    const registers = [this.registry];
    // Read at scrape time through `collect`; `self` because prom-client binds `this` to the metric there.
    const self = this;
    collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });
    new Gauge({
      name: `${METRIC_PREFIX}build_info`,
      help: 'Always 1; the labels say which API build and Node.js version run.',
      labelNames: ['version', 'node_version'],
      registers,
    }).set({ version: apiVersion(), node_version: process.version }, 1);
    new Gauge({
      name: `${METRIC_PREFIX}sandboxes`,
      help: 'Sandboxes the platform holds, by state (creating: container being started; paused: with memory or to disk).',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = self.sources?.sandboxes();
        for (const state of SANDBOX_STATES) this.set({ state }, counts?.[state] ?? 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}sandboxes_max`,
      help: 'Sandboxes that may hold a container at once (TIDEPOOL_MAX_SANDBOXES).',
      registers,
      collect() {
        this.set(self.sources?.maxSandboxes ?? 0);
      },
    });
    // The nodes are read once per scrape (exposition), before the three node gauges collect.
    const nodes = (): NodeGaugeValues[] | undefined => self.nodeValues;
    new Gauge({
      name: `${METRIC_PREFIX}cluster_node_status`,
      help: 'Nodes of the cluster by status (1 for the status the node is in); reported by one replica only.',
      labelNames: ['node', 'status'],
      registers,
      collect() {
        const values = nodes();
        this.reset();
        for (const node of values ?? []) for (const status of NODE_STATUSES) this.set({ node: node.nodeId, status }, node.status === status ? 1 : 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}cluster_node_heartbeat_age_seconds`,
      help: 'Seconds since each node last answered a heartbeat; reported by one replica only.',
      labelNames: ['node'],
      registers,
      collect() {
        const values = nodes();
        this.reset();
        for (const node of values ?? []) this.set({ node: node.nodeId }, node.heartbeatAgeSeconds);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}cluster_node_sandboxes`,
      help: 'Sandboxes recorded on each node (running or paused); reported by one replica only.',
      labelNames: ['node'],
      registers,
      collect() {
        const values = nodes();
        this.reset();
        for (const node of values ?? []) this.set({ node: node.nodeId }, node.sandboxes);
      },
    });
    this.sandboxOperationSeconds = new Histogram({
      name: `${METRIC_PREFIX}sandbox_operation_duration_seconds`,
      help: 'Duration of sandbox creates, pauses, resumes and snapshots, by operation and outcome.',
      labelNames: ['operation', 'outcome'],
      buckets: OPERATION_BUCKETS,
      registers,
    });
    for (const operation of SANDBOX_OPERATIONS) for (const outcome of OUTCOMES) this.sandboxOperationSeconds.zero({ operation, outcome });
    this.buildSeconds = new Histogram({
      name: `${METRIC_PREFIX}template_build_duration_seconds`,
      help: 'Duration of template builds from getting a build slot to ready (success) or failed/cancelled (error).',
      labelNames: ['outcome'],
      buckets: OPERATION_BUCKETS,
      registers,
    });
    for (const outcome of OUTCOMES) this.buildSeconds.zero({ outcome });
    new Gauge({
      name: `${METRIC_PREFIX}pool_containers`,
      help: 'Warm pool containers by state: ready to be claimed, warming (starting), in_use (claimed, sandbox alive).',
      labelNames: ['state'],
      registers,
      collect() {
        const stats = self.pool?.stats();
        this.set({ state: 'ready' }, stats?.ready ?? 0);
        this.set({ state: 'warming' }, stats?.warming ?? 0);
        if (stats?.inUse !== undefined) this.set({ state: 'in_use' }, stats.inUse);
      },
    });
    new Counter({
      name: `${METRIC_PREFIX}pool_claims_total`,
      help: 'Creates served by a warm pool container.',
      registers,
      collect() {
        this.reset();
        this.inc(self.pool?.stats().claimedTotal ?? 0);
      },
    });
    new Counter({
      name: `${METRIC_PREFIX}pool_cold_fallbacks_total`,
      help: 'Creates of a pooled template that found the pool empty and started a container cold.',
      registers,
      collect() {
        this.reset();
        this.inc(self.pool?.stats().coldFallbacksTotal ?? 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}pool_target_containers`,
      help: 'Containers the warm pool decided to keep ready (ready + warming), over every template: pinned sizes and demand, after the caps.',
      registers,
      collect() {
        this.set(self.pool?.stats().target ?? 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}pool_wanted_containers`,
      help: 'Containers pinned sizes and recent demand ask the warm pool for, before the sandbox limit and memory caps.',
      registers,
      collect() {
        this.set(self.pool?.stats().wanted ?? 0);
      },
    });
    new Counter({
      name: `${METRIC_PREFIX}pool_size_decisions_total`,
      help: 'Warm pool size decisions that changed a template size or its reason: direction grow/shrink/hold, reason pinned/floor/demand/ceiling/sandbox_limit/memory.',
      labelNames: ['direction', 'reason'],
      registers,
      collect() {
        this.reset();
        for (const [change, count] of Object.entries(self.pool?.stats().sizeChanges ?? {})) {
          const [direction, reason] = change.split(':');
          this.inc({ direction, reason }, count);
        }
      },
    });
    this.claimWaitSeconds = new Histogram({
      name: `${METRIC_PREFIX}pool_claim_wait_seconds`,
      help: 'How long a create waited to claim a warm pool container.',
      buckets: CLAIM_WAIT_BUCKETS,
      registers,
    });
    this.proxyRequestSeconds = new Histogram({
      name: `${METRIC_PREFIX}proxy_request_duration_seconds`,
      help: 'Duration of HTTP exchanges through the sandbox proxy (to the end of the response body), by status class (aborted: no answer sent).',
      labelNames: ['status_class'],
      buckets: PROXY_BUCKETS,
      registers,
    });
    this.proxyErrors = new Counter({
      name: `${METRIC_PREFIX}proxy_errors_total`,
      help: 'Errors the sandbox proxy answered itself (HTTP and upgrades), by reason.',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of PROXY_ERROR_REASONS) this.proxyErrors.inc({ reason }, 0);
    this.engineErrors = new Counter({
      name: `${METRIC_PREFIX}engine_call_errors_total`,
      help: 'Container engine calls that failed or ran past their deadline, by operation.',
      labelNames: ['operation'],
      registers,
    });
    this.orphans = new Counter({
      name: `${METRIC_PREFIX}orphan_cleanups_total`,
      help: 'Things removed because nothing owned them (at start-up or after the engine event stream came back), by kind.',
      labelNames: ['kind'],
      registers,
    });
    for (const kind of ORPHAN_KINDS) this.orphans.inc({ kind }, 0);
  }

  /** Where the scrape-time sandbox gauges read from (the lifecycle, once it exists). */
  observe(sources: MetricsSources): void {
    this.sources = sources;
  }

  /** The cluster's nodes (per-node gauges), read at scrape time. */
  observeNodes(source: NodeGaugeSource): void {
    this.nodes = source;
  }

  /** The warm pool's counters and gauges; its claim hook should call `poolClaimed`. */
  observePool(pool: PoolStatsSource): void {
    this.pool = pool;
  }

  /** The Prometheus text exposition of every metric. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    this.nodeValues = await this.nodes?.();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  sandboxOperation(operation: SandboxOperation, outcome: Outcome, seconds: number): void {
    this.sandboxOperationSeconds.observe({ operation, outcome }, seconds);
  }

  templateBuild(outcome: Outcome, seconds: number): void {
    this.buildSeconds.observe({ outcome }, seconds);
  }

  proxyRequest(statusClass: string, seconds: number): void {
    this.proxyRequestSeconds.observe({ status_class: statusClass }, seconds);
  }

  proxyError(reason: string): void {
    this.proxyErrors.inc({ reason });
  }

  engineCallFailed(operation: string): void {
    this.engineErrors.inc({ operation });
  }

  orphansRemoved(kind: OrphanKind, count = 1): void {
    if (count > 0) this.orphans.inc({ kind }, count);
  }

  poolClaimed(waitSeconds: number): void {
    this.claimWaitSeconds.observe(waitSeconds);
  }
}
