/**
 * Which addresses the agent's tunnel may dial: those of containers its runtime manages, from `listManaged`,
 * cached briefly. A miss waits for a list fetched after the question was asked (a sandbox started a moment ago
 * must be found: under a burst its first tunnel often arrives within milliseconds of the last fetch), and fetches
 * start at most once per `minRefreshMs`, so a caller probing addresses cannot turn every tunnel request into an
 * engine call: misses arriving together share one fetch.
 */
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';

export interface ManagedAddressesOptions {
  ttlMs?: number;
  minRefreshMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class ManagedAddresses {
  private addresses = new Set<string>();
  private fetchedAt = Number.NEGATIVE_INFINITY;
  /** When the newest fetch started (its list is at least as fresh as that). */
  private startedAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | undefined;
  /** A fetch waiting for the previous one and for `minRefreshMs` to pass: misses join it. */
  private queued: Promise<void> | undefined;

  constructor(
    private readonly runtime: Pick<SandboxRuntime, 'listManaged'>,
    private readonly options: ManagedAddressesOptions = {},
    /** More addresses that may be dialled (the node's build containers: the API reaches their envd). */
    private readonly more?: () => Promise<string[]>,
  ) {}

  private now(): number {
    return (this.options.now ?? Date.now)();
  }

  private fetch(): Promise<void> {
    this.startedAt = this.now();
    const fetching = Promise.all([this.runtime.listManaged(), this.more?.() ?? []])
      .then(([containers, more]) => {
        this.addresses = new Set([...containers.filter((c) => c.status === 'running' || c.status === 'paused').flatMap((c) => (c.address ? [c.address] : [])), ...more]);
        this.fetchedAt = this.now();
      })
      .finally(() => {
        if (this.refreshing === fetching) this.refreshing = undefined;
      });
    this.refreshing = fetching;
    return fetching;
  }

  /** Resolves once a fetch that started at or after `askedAt` has finished (or failed: rejects then). */
  private fetchedSince(askedAt: number): Promise<void> {
    if (this.refreshing && this.startedAt >= askedAt) return this.refreshing;
    const spacing = this.options.minRefreshMs ?? 250;
    if (!this.refreshing && !this.queued && this.now() - this.startedAt >= spacing) return this.fetch();
    this.queued ??= (async () => {
      try {
        await this.refreshing?.catch(() => undefined);
        const wait = this.startedAt + spacing - this.now();
        if (wait > 0) await (this.options.sleep ?? realSleep)(wait);
      } finally {
        this.queued = undefined;
      }
      await this.fetch();
    })();
    return this.queued;
  }

  /** True when `address` belongs to a running (or frozen) managed container. */
  async has(address: string): Promise<boolean> {
    const askedAt = this.now();
    if (askedAt - this.fetchedAt <= (this.options.ttlMs ?? 2_000) && this.addresses.has(address)) return true;
    await this.fetchedSince(askedAt);
    return this.addresses.has(address);
  }
}
