/**
 * Counts failed authentications per client address, so a key cannot be guessed at request speed: after
 * `limit` failures inside one window (which starts at an address's first failure) every further attempt from
 * that address is refused until the window ends. Memory is bounded: at most `maxTracked` addresses are kept,
 * the least recently failing one is forgotten first, and an address whose window has passed is dropped.
 */

export interface AuthFailureLimits {
  /** Failures an address may have in one window; 0 turns the limiter off. */
  limit: number;
  windowMs: number;
  /** Addresses tracked at once (the oldest is evicted beyond it). */
  maxTracked: number;
}

interface Window {
  startedAt: number;
  failures: number;
}

export const DEFAULT_MAX_TRACKED_ADDRESSES = 10_000;

export class AuthFailureLimiter {
  /** Insertion order is recency: a failing address is moved to the end. */
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly limits: AuthFailureLimits,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whole seconds until `address` may try again, or 0 when it may try now. */
  retryAfterSeconds(address: string): number {
    if (this.limits.limit === 0) return 0;
    const window = this.current(address);
    if (!window || window.failures < this.limits.limit) return 0;
    return Math.max(1, Math.ceil((window.startedAt + this.limits.windowMs - this.now()) / 1000));
  }

  /** Counts a failure; true when it is the one that reaches the limit (worth a log line). */
  recordFailure(address: string): boolean {
    if (this.limits.limit === 0) return false;
    const window = this.current(address) ?? { startedAt: this.now(), failures: 0 };
    window.failures += 1;
    this.windows.delete(address);
    this.windows.set(address, window);
    while (this.windows.size > this.limits.maxTracked) {
      const oldest = this.windows.keys().next().value as string;
      this.windows.delete(oldest);
    }
    return window.failures === this.limits.limit;
  }

  /** Addresses tracked now (for tests and metrics). */
  get trackedCount(): number {
    return this.windows.size;
  }

  /** The address's window if it has not ended; an ended one is dropped. */
  private current(address: string): Window | undefined {
    const window = this.windows.get(address);
    if (!window) return undefined;
    if (this.now() - window.startedAt >= this.limits.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return window;
  }
}
