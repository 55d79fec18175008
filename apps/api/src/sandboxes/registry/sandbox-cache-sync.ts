import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelSubscription, ReplicaChannel } from '../../store/sql.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import type { SandboxStore } from './sandbox-store.ts';

/** The channel the store announces every sandbox row change on (migration 8's trigger; payload: the sandbox id). */
export const SANDBOX_CHANNEL = 'tidepool_sandbox';
/** A full catch-up this often besides the change feed (a safety net; the feed is what keeps the cache fresh). */
const RESYNC_MS = 30_000;
/** Ids read back per store query. */
const BATCH = 200;
/** How long `caughtUp` waits for its own marker to come back before answering anyway. */
const BARRIER_TIMEOUT_MS = 2_000;
const BARRIER_PREFIX = 'caught-up:';

export interface CacheSyncDeps {
  channel: ReplicaChannel;
  store: SandboxStore;
  /** Takes in one sandbox's stored state (undefined: gone). */
  apply(id: string, record: SandboxRecord | undefined): void;
  /** The ids the cache holds now (a catch-up drops the ones the store no longer has). */
  held(): Iterable<string>;
  logger: Logger;
}

/**
 * Keeps one replica's sandbox cache fresh from PostgreSQL: every committed change to a sandbox row is notified (LISTEN
 * on a connection of its own), and the changed rows are read back in batches, one batch at a time, so the last read
 * of an id always starts after its last change committed. After every (re)connection, and every 30 s, everything is
 * read again (notifications sent while disconnected are lost). A replica sees another's change a notification and
 * one query later: milliseconds (measured in apps/api/test/api-replicas.test.ts).
 */
export class SandboxCacheSync {
  private subscription: ChannelSubscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly pending = new Set<string>();
  private draining: Promise<void> | undefined;
  private resyncing: Promise<void> | undefined;
  private readonly barriers = new Map<string, () => void>();
  private readonly prefix = `${BARRIER_PREFIX}${randomBytes(6).toString('hex')}:`;
  private barrierCount = 0;
  private stopped = false;
  /** Ids notified since the running catch-up began: its (older) read of them is not applied. */
  private touched: Set<string> | undefined;

  constructor(private readonly deps: CacheSyncDeps) {}

  /** Listens, then reads everything once (resolves when the cache holds the store's state). */
  async start(): Promise<void> {
    let first = true;
    this.subscription = await this.deps.channel.listen(SANDBOX_CHANNEL, {
      message: (payload) => this.received(payload),
      connected: () => {
        if (first) return;
        void this.resync();
      },
    });
    first = false;
    await this.resync();
    this.timer = setInterval(() => void this.resync(), RESYNC_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.subscription?.close();
    for (const done of this.barriers.values()) done();
    this.barriers.clear();
    await this.draining;
    await this.resyncing;
  }

  /**
   * Resolves once every change committed before the call is in the cache (read-your-writes across replicas, for
   * lists): a marker sent on the channel comes back after every notification committed before it.
   */
  async caughtUp(): Promise<void> {
    if (this.stopped || !this.subscription) return;
    const marker = `${this.prefix}${++this.barrierCount}`;
    let timer: NodeJS.Timeout | undefined;
    const back = new Promise<void>((resolve) => {
      this.barriers.set(marker, resolve);
      timer = setTimeout(resolve, BARRIER_TIMEOUT_MS);
    });
    try {
      await this.deps.channel.notify(SANDBOX_CHANNEL, marker);
      await back;
      await this.draining;
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'could not wait for the sandbox change feed; answering from the cache');
    } finally {
      clearTimeout(timer);
      this.barriers.delete(marker);
    }
  }

  private received(payload: string): void {
    if (payload.startsWith(BARRIER_PREFIX)) {
      // Changes notified before the marker are queued already: the marker is done when they are read.
      const done = this.barriers.get(payload);
      if (done) void this.drain().then(done);
      return;
    }
    if (payload.length === 0 || payload.length > 100) return;
    this.touched?.add(payload);
    this.pending.add(payload);
    void this.drain();
  }

  /** Reads the pending ids back, one batch at a time (a second call joins the running one). */
  private drain(): Promise<void> {
    this.draining ??= (async () => {
      while (this.pending.size > 0 && !this.stopped) {
        const ids = [...this.pending].slice(0, BATCH);
        for (const id of ids) this.pending.delete(id);
        try {
          const found = new Map((await this.deps.store.getMany(ids)).map((r) => [r.sandboxId, r]));
          for (const id of ids) this.deps.apply(id, found.get(id));
        } catch (error) {
          this.deps.logger.warn({ err: error, sandboxes: ids.length }, 'reading changed sandboxes failed; the next catch-up reads them');
          return;
        }
      }
    })().finally(() => {
      this.draining = undefined;
    });
    return this.draining;
  }

  /** Reads every record; ids the cache holds that the store lacks are read once more before they are dropped. */
  resync(): Promise<void> {
    this.resyncing ??= (async () => {
      const touched = new Set<string>();
      this.touched = touched;
      try {
        const stored = await this.deps.store.all();
        const ids = new Set(stored.map((r) => r.sandboxId));
        for (const record of stored) if (!touched.has(record.sandboxId)) this.deps.apply(record.sandboxId, record);
        for (const id of this.deps.held()) if (!ids.has(id)) this.pending.add(id);
        await this.drain();
      } catch (error) {
        this.deps.logger.warn({ err: error }, 'sandbox cache catch-up failed; retried later');
      }
    })().finally(() => {
      this.touched = undefined;
      this.resyncing = undefined;
    });
    return this.resyncing;
  }
}
