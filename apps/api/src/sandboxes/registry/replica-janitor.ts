import type { Logger } from 'pino';
import { SweepLoop } from '../../sweep-loop.ts';
import { RESERVATION_RENEW_MS, type SlotReservations } from './slot-reservations.ts';

/** How long the sandboxes of abandoned reservations are looked after: an engine call the dead replica sent may finish later. */
export const ABANDONED_WATCH_MS = 60_000;

export interface JanitorDeps {
  reservations: SlotReservations;
  /** Removes what the sandboxes of abandoned reservations left half-made on the nodes (each under its lock). */
  clean(sandboxIds: string[]): Promise<void>;
  logger: Logger;
}

/**
 * Every few seconds (shared database): renews this replica's reservations, and takes the ones of replicas that stopped
 * renewing them (killed, hung) to clean up what they left half-made, looking again every round for a minute. A
 * reservation is taken by exactly one replica; whatever is left after that goes at the node's reconcile.
 */
export class ReplicaJanitor {
  private readonly loop = new SweepLoop(
    () => this.roundNow(),
    (error) => this.deps.logger.warn({ err: error }, 'renewing or collecting sandbox reservations failed; retried next round'),
  );
  /** Sandboxes of abandoned reservations still looked after, until when. */
  private readonly watching = new Map<string, number>();

  constructor(private readonly deps: JanitorDeps) {}

  start(intervalMs = RESERVATION_RENEW_MS): void {
    this.loop.start(intervalMs);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round (rounds never overlap). */
  round(): Promise<void> {
    return this.loop.run();
  }

  private async roundNow(): Promise<void> {
    const { reservations, clean, logger } = this.deps;
    await reservations.renew();
    const now = Date.now();
    for (const abandoned of await reservations.collectAbandoned(now)) {
      logger.warn({ sandboxId: abandoned.sandboxId, kind: abandoned.kind }, 'an API replica stopped renewing its reservation; cleaning up after it');
      this.watching.set(abandoned.sandboxId, now + ABANDONED_WATCH_MS);
    }
    for (const [sandboxId, until] of this.watching) if (until < now) this.watching.delete(sandboxId);
    if (this.watching.size === 0) return;
    // Again every round for a while: the engine may finish a container the dead replica asked for after the first look.
    await clean([...this.watching.keys()]).catch((error: unknown) => logger.error({ err: error }, 'cleaning up after abandoned reservations failed; retried next round'));
  }
}
