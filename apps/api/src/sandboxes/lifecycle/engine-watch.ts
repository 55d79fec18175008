import type { Logger } from 'pino';
import type { MetricsSink } from '../../observability/metrics-sink.ts';
import type { EngineEvent, EngineEventStream } from '../../runtime/engine-events.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { SandboxLifecycle } from './sandbox-lifecycle.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';
import type { NodePools } from '../pool/node-pools.ts';
import type { SandboxCreations } from './sandbox-creations.ts';

/** An `oom` this close before a `die` means the kernel's OOM killer ended the sandbox. */
const OOM_BEFORE_DEATH_S = 2;
/** After a reconnect, how long replayed events get before every sandbox is checked against the engine. */
const RESYNC_DELAY_MS = 1_000;

export interface EngineWatchOptions {
  /** The engine of one node, and that node's id (its sandboxes are the ones checked); none: every sandbox. */
  runtime: SandboxRuntime;
  nodeId?: string;
  /** Ends a sandbox whose container died (as a kill, the reason in its log). */
  lifecycle: Pick<SandboxLifecycle, 'containerLost'>;
  /** The sandboxes held: whose container an event names, their event logs, and whether an id is anyone's. */
  registry: Pick<SandboxRegistry, 'get' | 'list' | 'recordEvent' | 'known'>;
  /** Creations in flight: their containers exist before their records. */
  creations: Pick<SandboxCreations, 'isCreating'>;
  /** The warm pools: a ready container that died leaves its pool; pooled containers are no orphans. */
  pools?: Pick<NodePools, 'lost' | 'owns'>;
  logger: Logger;
  /** Engine time (seconds) to follow events from; the platform passes the moment before its restart reconcile. */
  since: number;
  /** Delay before the first reconnect attempt, doubled up to `maxBackoffMs`. */
  firstBackoffMs?: number;
  maxBackoffMs?: number;
  /** Counts the orphan containers a resync removes. */
  metrics?: MetricsSink;
}

/**
 * Follows the engine's events for this platform's sandbox containers. A container that dies under a
 * sandbox ends the sandbox (as a kill, with the reason in its log); an OOM kill inside a sandbox is
 * written to its log. When the stream drops it reconnects with backoff from the last event seen (so
 * nothing is missed) and then checks every sandbox against the engine (a restarted daemon stops them all).
 */
export class EngineWatch {
  private stopped = false;
  private stream: EngineEventStream | undefined;
  private since: number;
  private wake: (() => void) | undefined;
  private handling: Promise<unknown> = Promise.resolve();
  private loop: Promise<void> | undefined;
  /** When each container last reported an OOM kill (engine seconds). */
  private readonly oomAt = new Map<string, number>();
  /** Connections made so far (the first one is the platform start, already reconciled). */
  connections = 0;

  constructor(private readonly options: EngineWatchOptions) {
    this.since = options.since;
  }

  start(): void {
    if (!this.options.runtime.watchEvents) return;
    this.loop = this.follow();
  }

  /** Drops the current stream as if the engine had closed it (tests: nothing may be lost across the reconnect). */
  interrupt(): void {
    this.stream?.close();
  }

  /** Stops following and waits for the events already received to be handled. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stream?.close();
    this.wake?.();
    await this.loop;
    await this.handling;
  }

  private async follow(): Promise<void> {
    const { runtime, logger } = this.options;
    const first = this.options.firstBackoffMs ?? 250;
    const max = this.options.maxBackoffMs ?? 10_000;
    let delay = first;
    let attempt = 0;
    while (!this.stopped) {
      try {
        const stream = await runtime.watchEvents!(this.since, (event) => this.receive(event));
        this.stream = stream;
        if (this.stopped) stream.close();
        this.connections += 1;
        if (this.connections > 1) {
          logger.info({ since: this.since, attempt }, 'following engine events again; checking sandboxes against the engine');
          // Events replayed from `since` are handled first (they say why); the check catches what no event reports.
          await this.pause(RESYNC_DELAY_MS);
          if (!this.stopped) await this.enqueue(() => this.resync());
        }
        delay = first;
        attempt = 0;
        const reason = await stream.ended;
        if (this.stopped) break;
        logger.warn({ err: reason }, 'engine event stream ended; reconnecting');
      } catch (error) {
        attempt += 1;
        logger.warn({ err: error, attempt, retryInMs: delay }, 'cannot follow engine events; retrying');
      }
      await this.pause(delay);
      delay = Math.min(max, delay * 2);
    }
  }

  private pause(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Events are handled one after another, in the order the engine sent them. */
  private enqueue(work: () => Promise<unknown>): Promise<unknown> {
    this.handling = this.handling.then(work).catch((error: unknown) => this.options.logger.error({ err: error }, 'handling an engine event failed'));
    return this.handling;
  }

  private receive(event: EngineEvent): void {
    if (event.time > this.since) this.since = event.time;
    void this.enqueue(() => this.handle(event));
  }

  private async handle(event: EngineEvent): Promise<void> {
    const { lifecycle, registry, pools, logger, nodeId } = this.options;
    const log = logger.child({ sandboxId: event.sandboxId });
    const found = registry.get(event.sandboxId);
    // A node's events speak for its own containers only: one naming a sandbox on another node (a compromised or
    // confused node) changes nothing.
    const elsewhere = found !== undefined && nodeId !== undefined && found.nodeId !== nodeId;
    if (elsewhere) log.warn({ containerId: event.containerId, kind: event.kind, fromNode: nodeId, sandboxNode: found.nodeId }, "ignored an engine event about another node's sandbox");
    const record = elsewhere ? undefined : found;
    if (event.kind === 'oom') {
      this.oomAt.set(event.containerId, event.time);
      if (!record || record.containerId !== event.containerId) return;
      const message = `out of memory: the kernel killed a process in the sandbox (memory limit ${record.memoryMB} MiB)`;
      await registry.recordEvent(event.sandboxId, message, 'warn').catch((error: unknown) => log.warn({ err: error }, 'could not store the sandbox event'));
      log.warn({ containerId: event.containerId, memoryMB: record.memoryMB }, 'sandbox ran out of memory; a process was OOM-killed');
      return;
    }
    const oom = this.oomAt.get(event.containerId);
    this.oomAt.delete(event.containerId);
    if (!record || record.containerId !== event.containerId) {
      if (!elsewhere && pools?.lost(event.containerId, nodeId)) log.warn({ containerId: event.containerId, exitCode: event.exitCode }, 'a ready warm-pool container exited; removed from the pool');
      else log.debug({ containerId: event.containerId }, 'container of no live sandbox exited (removed by the platform)');
      return;
    }
    const reason =
      oom !== undefined && event.time - oom <= OOM_BEFORE_DEATH_S
        ? `sandbox OOM-killed: its container ran out of memory (limit ${record.memoryMB} MiB) and was stopped`
        : `sandbox container exited unexpectedly with code ${event.exitCode ?? 'unknown'}`;
    await lifecycle.containerLost(event.sandboxId, event.containerId, reason);
  }

  /**
   * The live form of the restart reconcile: every sandbox whose container stopped or vanished is
   * removed, and containers of this platform that belong to no sandbox (nor a creation in flight) go.
   */
  async resync(): Promise<void> {
    const { runtime, lifecycle, registry, creations, pools, logger } = this.options;
    for (const record of registry.list()) {
      if (!record.containerId || (this.options.nodeId !== undefined && record.nodeId !== this.options.nodeId)) continue;
      await lifecycle
        .containerLost(record.sandboxId, record.containerId, 'sandbox container stopped or vanished while the engine was unreachable (engine restart?)')
        .catch((error: unknown) => logger.child({ sandboxId: record.sandboxId }).error({ err: error }, 'checking the sandbox container failed'));
    }
    for (const container of await runtime.listManaged()) {
      if (container.unclaimed || creations.isCreating(container.sandboxId) || pools?.owns(container.sandboxId) || (await registry.known(container.sandboxId))) continue;
      logger.child({ sandboxId: container.sandboxId }).warn({ containerId: container.containerId }, 'removing container without a sandbox record');
      await runtime.remove(container.containerId);
      this.options.metrics?.orphansRemoved('container');
    }
  }
}
