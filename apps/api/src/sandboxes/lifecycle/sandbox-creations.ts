import { FirstUseTracker } from '../pool/first-use-tracker.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

/**
 * Creations in flight (their containers exist before their records do) and new sandboxes awaiting their first proxied
 * exchange. The lifecycle records them; the warm pools wait for them, the engine watch and the reconcile leave their
 * containers alone, the metrics count them.
 */
export class SandboxCreations {
  private readonly creating = new Map<string, Promise<SandboxRecord>>();

  constructor(private readonly firstUse = new FirstUseTracker()) {}

  /** A creation of `sandboxId` began; it counts as in flight until `launching` settles, then as awaiting its first use. */
  track(sandboxId: string, launching: Promise<SandboxRecord>): Promise<SandboxRecord> {
    this.creating.set(sandboxId, launching);
    return launching
      .then((record) => {
        this.firstUse.created(sandboxId);
        return record;
      })
      .finally(() => this.creating.delete(sandboxId));
  }

  /** True while the sandbox is being created (its container may exist without a record). */
  isCreating(sandboxId: string): boolean {
    return this.creating.has(sandboxId);
  }

  /** Creations in flight. */
  count(): number {
    return this.creating.size;
  }

  /** The creations in flight (shutdown waits for them). */
  inFlight(): Promise<SandboxRecord>[] {
    return [...this.creating.values()];
  }

  /** An exchange with the sandbox ended (or it is gone). */
  served(sandboxId: string): void {
    this.firstUse.served(sandboxId);
  }

  /** Whether a sandbox created in the last few seconds has not been served its first exchange yet (first-use-tracker.ts). */
  awaitingFirstUse(): boolean {
    return this.firstUse.awaiting();
  }
}
