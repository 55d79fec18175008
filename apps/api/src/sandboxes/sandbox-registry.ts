import { randomBytes } from 'node:crypto';
import { notFound, PlatformError, sandboxNotFound } from '../errors.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import type { SandboxStore } from './sandbox-store.ts';

/**
 * The sandboxes the platform holds: an in-memory map mirroring the store (it serves the proxy),
 * one operation at a time per sandbox, and the concurrency limit.
 */
/** How long a replica may take to act on a sandbox's timeout before another may try. */
const TIMEOUT_LEASE_MS = 60_000;

export class SandboxRegistry {
  /** This process among the replicas sharing the database (lease owner). */
  readonly replicaId = randomBytes(8).toString('hex');
  private readonly records = new Map<string, SandboxRecord>();
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Creations in flight: they count against the concurrency limit before they exist. */
  private reserved = 0;

  /**
   * `unavailable` says why a record cannot be used now (its node was lost), or undefined: the one place that decides
   * which sandboxes answer 404 although their records are kept (they are back when their node is).
   */
  constructor(
    private readonly store: SandboxStore,
    private readonly maxSandboxes: number,
    private readonly unavailable: (record: SandboxRecord) => string | undefined = () => undefined,
  ) {}

  /** The record, unless it is unavailable (its node was lost). */
  get(id: string): SandboxRecord | undefined {
    const record = this.records.get(id);
    return record && !this.unavailable(record) ? record : undefined;
  }

  /**
   * The record, or 404: "doesn't exist" (also for another team's sandbox when `teamId` is given: the same error,
   * the same message), or why it cannot be reached (its node was lost).
   */
  require(id: string, teamId?: string): SandboxRecord {
    const record = this.records.get(id);
    if (!record || (teamId !== undefined && record.teamId !== teamId)) throw sandboxNotFound(id);
    const reason = this.unavailable(record);
    if (reason) throw notFound(reason);
    return record;
  }

  /** Why the sandbox cannot be reached although it exists (its node was lost), or undefined. */
  unavailableReason(id: string): string | undefined {
    const record = this.records.get(id);
    return record && this.unavailable(record);
  }

  /** Available records (those of lost nodes left out). */
  list(): SandboxRecord[] {
    return [...this.records.values()].filter((r) => !this.unavailable(r));
  }

  /** Every record held, those of lost nodes included. */
  all(): SandboxRecord[] {
    return [...this.records.values()];
  }

  /** The record whether or not it is available. */
  peek(id: string): SandboxRecord | undefined {
    return this.records.get(id);
  }

  running(): SandboxRecord[] {
    return this.list().filter((r) => r.state === 'running');
  }

  /** Records as stored, for restart recovery (the map is empty until they are persisted again). */
  stored(): Promise<SandboxRecord[]> {
    return this.store.all();
  }

  /** Runs `operation` after every earlier operation on the same sandbox finished. */
  serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(operation);
    this.queues.set(id, next);
    void next
      .finally(() => {
        if (this.queues.get(id) === next) this.queues.delete(id);
      })
      .catch(() => undefined);
    return next;
  }

  /** Operations queued or running, on any sandbox. */
  inFlight(): Promise<unknown>[] {
    return [...this.queues.values()];
  }

  /** Stores the record (the map holds it once stored), then its event line. */
  async persist(record: SandboxRecord, event?: string): Promise<void> {
    await this.store.save(record);
    this.records.set(record.sandboxId, record);
    if (event) await this.store.recordEvent(record.sandboxId, 'info', event);
  }

  /** True when this replica may act on the sandbox's expired timeout (no other replica holds that duty). */
  claimTimeout(id: string): Promise<boolean> {
    return this.store.claimTimeout(id, this.replicaId, new Date(), TIMEOUT_LEASE_MS);
  }

  releaseTimeout(id: string): Promise<void> {
    return this.store.releaseTimeout(id, this.replicaId);
  }

  recordEvent(id: string, message: string, level: 'info' | 'warn' | 'error' = 'info'): Promise<void> {
    return this.store.recordEvent(id, level, message);
  }

  /** Forgets the sandbox: out of the map at once (nothing routes to it any more), then out of the store. */
  async forget(id: string): Promise<void> {
    this.records.delete(id);
    await this.store.delete(id);
  }

  /** Slots not held by a sandbox, a creation in flight or a pooled container. */
  freeSlots(): number {
    let holding = this.reserved;
    for (const record of this.records.values()) if (record.containerId) holding += 1;
    return Math.max(0, this.maxSandboxes - holding);
  }

  /**
   * Takes `count` slots. Sandboxes that hold a container (running, or paused with memory) count
   * against the limit, and so do creations and filesystem resumes in flight; one paused to an image holds nothing.
   */
  reserveSlots(count = 1): (howMany?: number) => void {
    let holding = this.reserved;
    for (const record of this.records.values()) if (record.containerId) holding += 1;
    if (holding + count > this.maxSandboxes) {
      throw new PlatformError('limit', `you have reached the maximum number of concurrent sandboxes (${this.maxSandboxes}); kill or pause some and try again`);
    }
    this.reserved += count;
    let released = 0;
    return (howMany = count - released) => {
      const giving = Math.min(howMany, count - released);
      this.reserved -= giving;
      released += giving;
    };
  }
}
