/**
 * How many ready containers the warm pool should keep of one pool key: pure logic, no timers and no I/O
 * (the clock and the machine's figures are passed in), so it can be tested with a fake clock.
 *
 * An adaptive key's size is the peak number of creates seen within one refill period over the last `idleMs`
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

/** When creates of each key happened, for the last `idleMs`. */
export class DemandHistory {
  /** key → create times, oldest first. */
  private readonly times = new Map<string, number[]>();

  constructor(
    private readonly settings: Pick<SizingSettings, 'periodMs' | 'idleMs'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** One create of `key` (served from the pool or not). */
  record(key: string): void {
    let times = this.times.get(key);
    if (!times) this.times.set(key, (times = []));
    times.push(this.now());
    this.prune(key);
  }

  /** Most creates of `key` within any one period (sliding) inside the window; 0 when none. */
  peak(key: string): number {
    this.prune(key);
    const times = this.times.get(key) ?? [];
    let peak = 0;
    for (let first = 0, last = 0; last < times.length; last += 1) {
      while (times[last] - times[first] >= this.settings.periodMs) first += 1;
      peak = Math.max(peak, last - first + 1);
    }
    return peak;
  }

  /** Keys with any demand left in the window. */
  keys(): string[] {
    for (const key of [...this.times.keys()]) this.prune(key);
    return [...this.times.keys()];
  }

  private prune(key: string): void {
    const times = this.times.get(key);
    if (!times) return;
    const oldest = this.now() - this.settings.idleMs;
    let drop = 0;
    while (drop < times.length && times[drop] <= oldest) drop += 1;
    if (drop > 0) times.splice(0, drop);
    if (times.length === 0) this.times.delete(key);
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
