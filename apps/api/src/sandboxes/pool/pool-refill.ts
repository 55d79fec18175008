import type { Logger } from 'pino';
import type { PoolTarget } from './pool-targets.ts';

const MAX_BACKOFF_MS = 30_000;

export interface PoolRefillDeps {
  /** Containers started at once. */
  parallel: number;
  /** Takes one slot under the sandbox limit; throws when none is free. */
  reserveSlot(): (howMany?: number) => void;
  /** Starts one container of `target` holding the slot `release` gives back. */
  warm(target: PoolTarget, release: () => void): Promise<void>;
  /** A start ended (either way): the pool looks again. */
  settled(): void;
  logger: Logger;
}

/**
 * Starts the pool's containers: up to `parallel` at once, each holding a slot under the sandbox limit from
 * before it starts; after a failed start, none for 1 s, 2 s, 4 s … up to 30 s (reset by a success).
 */
export class PoolRefill {
  private readonly inFlight = new Set<Promise<void>>();
  private failures = 0;
  private backoffUntil = 0;

  constructor(private readonly deps: PoolRefillDeps) {}

  /** How long to wait before starting anything again after failures (ms; ≤ 0 = now). */
  backoffMs(): number {
    return this.backoffUntil - Date.now();
  }

  /** Resolves once every start in flight has ended. */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  /** Starts containers for what `next` names until it names nothing, `parallel` are in flight, or no slot is free. */
  fill(next: () => PoolTarget | undefined): void {
    while (this.inFlight.size < Math.max(1, this.deps.parallel)) {
      const target = next();
      if (!target) return;
      let release: () => void;
      try {
        release = once(this.deps.reserveSlot());
      } catch {
        // The sandbox limit is reached: sandboxes come first; the next check tries again.
        return;
      }
      const started = this.deps.warm(target, release).then(
        () => {
          this.failures = 0;
        },
        (error: unknown) => {
          this.failures += 1;
          const delay = Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** (this.failures - 1));
          this.backoffUntil = Date.now() + delay;
          this.deps.logger.warn({ err: error, key: target.key, templateRef: target.reference, attempt: this.failures, retryInMs: delay }, 'could not start a warm-pool container; retrying later');
        },
      );
      const tracked: Promise<void> = started.finally(() => {
        this.inFlight.delete(tracked);
        this.deps.settled();
      });
      this.inFlight.add(tracked);
    }
  }
}

/** A release that gives the slot back only the first time. */
function once(giveBack: (howMany?: number) => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    giveBack();
  };
}
