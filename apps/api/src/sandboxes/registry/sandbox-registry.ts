import { randomBytes } from 'node:crypto';
import { notFound, PlatformError, sandboxNotFound } from '../../errors.ts';
import type { ReplicaChannel, Sql } from '../../store/sql.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import type { SandboxStore } from './sandbox-store.ts';
import { SlotReservations } from './slot-reservations.ts';

/** How long a replica may take to act on a sandbox's timeout before another may try. */
const TIMEOUT_LEASE_MS = 60_000;
/** How long an id the store did not have is answered as missing without asking again (bounded; a change forgets it). */
const MISS_CACHE_MS = 2_000;
const MISS_CACHE_MAX = 10_000;

/** The database API replicas share (PostgreSQL), and what they coordinate through. */
export interface SharedDatabase {
  sql: Sql;
  channel: ReplicaChannel;
}

/**
 * The sandboxes the platform holds: an in-memory map mirroring the store (it serves the proxy) and one operation at a
 * time per sandbox (the slots under the limits are sandbox-slots.ts's). With a shared database (API replicas) the store is the truth: the map
 * is a cache kept fresh by the store's change notifications (SandboxCacheSync) and read through on a miss, an
 * operation on a sandbox holds a lock every replica honours and starts from the stored record, and slots are
 * reserved in the store (SlotReservations). Without one (SQLite, one process) the map is the truth, as it always was.
 */
export class SandboxRegistry {
  /** This process among the replicas sharing the database (lease owner). */
  readonly replicaId = randomBytes(8).toString('hex');
  private readonly records = new Map<string, SandboxRecord>();
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Shared database: slot reservations of every replica (sandbox-slots.ts takes and counts them; records end them). */
  readonly reservations: SlotReservations | undefined;
  /** Shared database: ids recently not found in the store, with when that answer expires. */
  private readonly misses = new Map<string, number>();
  /** Told when a record changed (or went) behind this process's back (another replica, a catch-up). */
  private changed: (id: string, record: SandboxRecord | undefined) => void = () => undefined;
  private readonly unavailable: (record: SandboxRecord) => string | undefined;
  private readonly shared: SharedDatabase | undefined;

  /**
   * `unavailable` says why a record cannot be used now (its node was lost), or undefined: the one place that decides
   * which sandboxes answer 404 although their records are kept (they are back when their node is).
   */
  constructor(
    private readonly store: SandboxStore,
    options: { unavailable?: (record: SandboxRecord) => string | undefined; shared?: SharedDatabase } = {},
  ) {
    this.unavailable = options.unavailable ?? (() => undefined);
    this.shared = options.shared;
    this.reservations = this.shared && new SlotReservations(this.shared.sql, this.shared.channel, this.replicaId);
  }

  /** True when API replicas share the store (PostgreSQL): the map is a cache of it. */
  get isShared(): boolean {
    return this.shared !== undefined;
  }

  /** Called with every record another replica changed or removed (after the map took it in). */
  onChange(listener: (id: string, record: SandboxRecord | undefined) => void): void {
    this.changed = listener;
  }

  /**
   * Takes in the stored state of one sandbox (undefined: gone), as the change feed or a catch-up read it. While this
   * process operates on the sandbox the map may briefly hold the stored state instead of the operation's copy: the
   * operation stores its result, and that change comes back through the feed in turn.
   */
  applyStored(id: string, record: SandboxRecord | undefined): void {
    this.misses.delete(id);
    const held = this.records.get(id);
    if (record) this.records.set(id, record);
    else this.records.delete(id);
    if (held || record) this.changed(id, record);
  }

  /**
   * Shared database: makes sure the map holds the sandbox if the store does (a sandbox another replica made a moment
   * ago may not have reached this cache yet). One store read per unknown id at most every 2 s; known ids cost nothing.
   */
  async ensure(id: string): Promise<void> {
    if (!this.shared || this.records.has(id)) return;
    const now = Date.now();
    if ((this.misses.get(id) ?? 0) > now) return;
    const record = await this.store.get(id);
    if (record) {
      if (!this.records.has(id)) this.applyStored(id, record);
      return;
    }
    if (this.misses.size >= MISS_CACHE_MAX) this.misses.clear();
    this.misses.set(id, now + MISS_CACHE_MS);
  }

  /**
   * True when the sandbox has a record (in the store, with a shared database) or, with a shared database, some
   * replica's live reservation: a container of it without a record here is another replica's work in progress.
   */
  async known(id: string): Promise<boolean> {
    if (this.records.has(id)) return true;
    if (!this.reservations) return false;
    await this.ensure(id);
    return this.records.has(id) || (await this.reservations.held(id));
  }

  /** Shared database: reads the sandbox's stored record into the map (undefined: it is gone). */
  private async refresh(id: string): Promise<void> {
    const record = await this.store.get(id);
    const held = this.records.get(id);
    if (record) this.records.set(id, record);
    else this.records.delete(id);
    if (held && !record) this.changed(id, undefined);
  }

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

  /**
   * Runs `operation` after every earlier operation on the same sandbox finished. With a shared database also after
   * every other replica's (a lock all replicas take), and with the map holding the stored record as it is now.
   */
  serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const shared = this.shared;
    const guarded = shared
      ? () =>
          shared.channel.withLock(`sandbox:${id}`, async () => {
            await this.refresh(id);
            return operation();
          })
      : operation;
    const next = previous.catch(() => undefined).then(guarded);
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

  /**
   * Stores the record (the map holds it once stored), then its event line. `created`: a new sandbox, whose slot
   * reservation (shared database) ends in the same transaction; refused when it is no longer this replica's (another
   * replica took this one for dead and cleaned up after it).
   */
  async persist(record: SandboxRecord, event?: string, created = false): Promise<void> {
    const { reservations, shared } = this;
    if (created && reservations && shared) {
      await shared.sql.transaction(async (sql) => {
        if (!(await reservations.release(record.sandboxId, sql))) {
          throw new PlatformError('internal', `Sandbox "${record.sandboxId}" was given up while it was being made (this API replica stopped renewing its reservation); try again`);
        }
        await this.store.within(sql).save(record);
      });
    } else {
      await this.store.save(record);
    }
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
}
