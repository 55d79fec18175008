/**
 * How many ready containers the warm pool should keep of one pool key: pure logic, no timers and no I/O
 * (the clock and the machine's figures are passed in), so it can be tested with a fake clock.
 *
 * An adaptive key's size is the peak number of creates seen in one refill period over the last `idleMs`
 * (a burst of 20 creates in one period asks for 20), never below its floor nor above the ceiling; after
 * `idleMs` without a create the peak is gone and the size is the floor again. A pinned key
 * (`TIDEPOOL_WARM_POOL`) keeps its size whatever the demand. Either way the size is then capped by what
 * the machine allows: free slots under `TIDEPOOL_MAX_SANDBOXES` and the memory left above a reserve.
 */

export interface SizingSettings {
  /** Length of one demand bucket: the refill period (ms). */
  periodMs: number;
  /** How far back demand counts; idle this long, an adaptive key shrinks to its floor (ms). */
  idleMs: number;
  /** Most containers an adaptive key may keep. */
  ceiling: number;
}

/** Creates seen per key, bucketed by refill period, for the last `idleMs`. */
export class DemandHistory {
  /** key → (bucket index → creates in it). */
  private readonly buckets = new Map<string, Map<number, number>>();

  constructor(
    private readonly settings: Pick<SizingSettings, 'periodMs' | 'idleMs'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** One create of `key` (served from the pool or not). */
  record(key: string, count = 1): void {
    const bucket = Math.floor(this.now() / this.settings.periodMs);
    let perKey = this.buckets.get(key);
    if (!perKey) this.buckets.set(key, (perKey = new Map()));
    perKey.set(bucket, (perKey.get(bucket) ?? 0) + count);
    this.prune(key);
  }

  /** Most creates of `key` in one period within the window; 0 when none. */
  peak(key: string): number {
    this.prune(key);
    let peak = 0;
    for (const count of this.buckets.get(key)?.values() ?? []) peak = Math.max(peak, count);
    return peak;
  }

  /** Keys with any demand left in the window. */
  keys(): string[] {
    for (const key of [...this.buckets.keys()]) this.prune(key);
    return [...this.buckets.keys()];
  }

  private prune(key: string): void {
    const perKey = this.buckets.get(key);
    if (!perKey) return;
    const oldest = Math.floor((this.now() - this.settings.idleMs) / this.settings.periodMs);
    for (const bucket of perKey.keys()) if (bucket <= oldest) perKey.delete(bucket);
    if (perKey.size === 0) this.buckets.delete(key);
  }
}

/** What the machine allows right now, for one decision. */
export interface SizingCaps {
  /** Containers of this key already ready or warming (they hold their slots already). */
  have: number;
  /** Containers (of any key) still starting: MemAvailable does not show their memory yet. */
  starting?: number;
  /** Slots free under the sandbox limit (not counting `have`). */
  freeSlots: number;
  /** MemAvailable of the machine (MiB); undefined when it cannot be read (no memory cap then). */
  memoryAvailableMB: number | undefined;
  /** Memory that must stay available (MiB). */
  memoryReserveMB: number;
  /** What one more idle pooled container is expected to take (MiB). */
  perContainerMB: number;
}

export type SizeReason = 'pinned' | 'floor' | 'demand' | 'ceiling' | 'sandbox_limit' | 'memory';

export interface SizeDecision {
  /** Containers to keep (ready + warming). */
  size: number;
  /** What the demand (or the pin) asked for before the machine's caps. */
  wanted: number;
  /** What decided `size`: the pin, the floor, the demand, the ceiling, or a cap that cut it. */
  reason: SizeReason;
}

export interface KeySizing {
  /** Set for a pinned key: its size, whatever the demand. */
  pinned?: number;
  /** Adaptive keys never go below this. */
  floor: number;
  /** Peak creates per period in the window (DemandHistory.peak). */
  peak: number;
}

/** The size of one key: pin or demand, floor and ceiling, then the machine's caps. */
export function decideSize(key: KeySizing, settings: Pick<SizingSettings, 'ceiling'>, caps: SizingCaps): SizeDecision {
  let wanted: number;
  let reason: SizeReason;
  if (key.pinned !== undefined) {
    wanted = key.pinned;
    reason = 'pinned';
  } else if (key.peak > settings.ceiling) {
    wanted = Math.max(key.floor, settings.ceiling);
    reason = wanted === key.floor ? 'floor' : 'ceiling';
  } else if (key.peak > key.floor) {
    wanted = key.peak;
    reason = 'demand';
  } else {
    wanted = key.floor;
    reason = 'floor';
  }
  let size = wanted;
  // Growing needs a free slot per new container; what is already there keeps its own.
  const bySlots = caps.have + Math.max(0, caps.freeSlots);
  if (size > bySlots) {
    size = bySlots;
    reason = 'sandbox_limit';
  }
  if (caps.memoryAvailableMB !== undefined && caps.perContainerMB > 0) {
    const room = Math.max(0, Math.floor((caps.memoryAvailableMB - caps.memoryReserveMB) / caps.perContainerMB) - (caps.starting ?? 0));
    const byMemory = caps.have + room;
    if (size > byMemory) {
      size = byMemory;
      reason = 'memory';
    }
  }
  return { size: Math.max(0, size), wanted, reason };
}
