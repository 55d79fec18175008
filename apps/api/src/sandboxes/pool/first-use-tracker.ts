/** How long a new sandbox counts as awaiting its first exchange at most (a client may create and never call it). */
export const FIRST_USE_WAIT_MS = 3_000;

/**
 * New sandboxes whose first proxied exchange has not ended yet. A burst's creates answer quickly, but the work each
 * client does next — its first command: a proxied stream, a shell in the sandbox — comes after; the warm pool holds
 * its refill (container starts, the machine's heaviest work) while any is pending, so the refill does not compete with
 * the burst it follows. Bounded: an entry lapses after `waitMs`.
 */
export class FirstUseTracker {
  private readonly pending = new Map<string, number>();

  constructor(
    private readonly waitMs = FIRST_USE_WAIT_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** A sandbox was just created (from the pool or cold). */
  created(sandboxId: string): void {
    const now = this.now();
    this.dropLapsed(now);
    this.pending.set(sandboxId, now + this.waitMs);
  }

  /** An exchange with the sandbox ended (or it is gone). */
  served(sandboxId: string): void {
    if (this.pending.size > 0) this.pending.delete(sandboxId);
  }

  /** Whether any sandbox created in the last `waitMs` still awaits its first exchange. */
  awaiting(): boolean {
    this.dropLapsed(this.now());
    return this.pending.size > 0;
  }

  /** Entries are kept in creation order, so lapsed ones are at the front: nothing grows when nobody asks. */
  private dropLapsed(now: number): void {
    for (const [sandboxId, until] of this.pending) {
      if (until > now) return;
      this.pending.delete(sandboxId);
    }
  }

  /** How many sandboxes are awaited (for tests). */
  get size(): number {
    return this.pending.size;
  }
}
