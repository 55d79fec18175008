/**
 * A node agent's own Prometheus metrics (TIDEPOOL_NODE_METRICS_LISTEN): what its engine holds, how its engine calls
 * go, its open tunnel streams, the malformed requests it answered and the requests its policy refused. Served by the
 * API's metrics listener code (observability/metrics-route.ts) on an address the operator chooses, apart from the
 * mutual-TLS listener. Names start with `tidepool_agent_` so they never mix with an API replica's.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { OPERATION_BUCKETS } from '../observability/platform-metrics.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { REFUSAL_REASONS, type RefusalReason } from './agent-policy.ts';

const PREFIX = 'tidepool_agent_';

/** Kinds of malformed requests (the `kind` label of tidepool_agent_protocol_errors_total). */
export const PROTOCOL_ERROR_KINDS = ['bad_body', 'bad_call', 'no_route', 'not_client_certificate', 'tls_handshake'] as const;
export type ProtocolErrorKind = (typeof PROTOCOL_ERROR_KINDS)[number];

const CONTAINER_STATES = ['running', 'paused', 'stopped'] as const;
type Listing = Awaited<ReturnType<SandboxRuntime['listManaged']>> | undefined;

export class AgentMetrics {
  readonly registry = new Registry();
  private readonly calls: Histogram<'operation' | 'outcome'>;
  private readonly tunnels: Gauge;
  private readonly tunnelsOpened: Counter;
  private readonly protocolErrors: Counter<'kind'>;
  private readonly refusals: Counter<'reason'>;

  private listing: Listing;

  constructor(private readonly runtime: SandboxRuntime) {
    const registers = [this.registry];
    // Read at scrape time through `collect`; `self` because prom-client binds `this` to the metric there.
    const self = this;
    collectDefaultMetrics({ register: this.registry, prefix: PREFIX });
    // The engine's listing is read once per scrape (exposition), before the gauge collects; an engine that does
    // not answer leaves the gauge at its last values (the scrape still succeeds).
    const managed = (): Listing => self.listing;
    new Gauge({
      name: `${PREFIX}containers`,
      help:
        'Sandbox containers the node runtime manages, by engine state and origin (pool: started by a warm pool, claimed or not; ' +
        'create: started for a sandbox). The API knows which pool containers a sandbox claimed (tidepool_pool_containers).',
      labelNames: ['state', 'origin'],
      registers,
      collect() {
        const all = managed();
        if (!all) return;
        for (const state of CONTAINER_STATES) {
          for (const origin of ['pool', 'create'] as const) {
            this.set({ state, origin }, all.filter((c) => c.status === state && (c.pooled === true) === (origin === 'pool')).length);
          }
        }
      },
    });
    this.calls = new Histogram({
      name: `${PREFIX}engine_call_duration_seconds`,
      help: 'Runtime and image calls the API made of this node (each one or more engine calls), by operation and outcome.',
      labelNames: ['operation', 'outcome'],
      buckets: OPERATION_BUCKETS,
      registers,
    });
    this.tunnels = new Gauge({ name: `${PREFIX}tunnel_streams_open`, help: 'Tunnels (CONNECT streams) to managed containers open now.', registers });
    this.tunnelsOpened = new Counter({
      name: `${PREFIX}tunnel_streams_total`,
      help: 'Tunnels (CONNECT streams) the API asked for since the agent started, refused ones included: proxy traffic and the API\'s own envd calls.',
      registers,
    });
    this.protocolErrors = new Counter({
      name: `${PREFIX}protocol_errors_total`,
      help: 'Requests answered with a protocol error (malformed body, unknown call or route, bad arguments) and refused TLS peers, by kind.',
      labelNames: ['kind'],
      registers,
    });
    for (const kind of PROTOCOL_ERROR_KINDS) this.protocolErrors.inc({ kind }, 0);
    this.refusals = new Counter({
      name: `${PREFIX}refused_requests_total`,
      help: 'Well-formed calls the node refused by its policy (bind sources, foreign containers, image names), by reason.',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of REFUSAL_REASONS) this.refusals.inc({ reason }, 0);
  }

  engineCall(operation: string, outcome: 'success' | 'error', seconds: number): void {
    this.calls.observe({ operation, outcome }, seconds);
  }

  tunnelOpened(): void {
    this.tunnels.inc();
    this.tunnelsOpened.inc();
  }

  tunnelClosed(): void {
    this.tunnels.dec();
  }

  protocolError(kind: ProtocolErrorKind): void {
    this.protocolErrors.inc({ kind });
  }

  refused(reason: RefusalReason): void {
    this.refusals.inc({ reason });
  }

  async exposition(): Promise<{ contentType: string; body: string }> {
    this.listing = await this.runtime.listManaged().catch(() => undefined);
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
