import type { Logger } from 'pino';
import { type AbandonedReservation, RESERVATION_RENEW_MS, type SlotReservations } from './slot-reservations.ts';

export interface JanitorDeps {
  reservations: SlotReservations;
  /** Cleans up after one abandoned reservation (under the sandbox's lock). */
  clean(abandoned: AbandonedReservation): Promise<void>;
  logger: Logger;
}

/**
 * Every few seconds (shared database): renews this replica's reservations, and takes the ones of replicas that stopped
 * renewing them (killed, hung) to clean up what they left half-made. A reservation is taken by exactly one replica;
 * a cleanup that fails leaves the rest to the node's reconcile (a container without a record or reservation).
 */
export class ReplicaJanitor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly deps: JanitorDeps) {}

  start(intervalMs = RESERVATION_RENEW_MS): void {
    this.timer = setInterval(() => void this.round(), intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One round (rounds never overlap). */
  round(): Promise<void> {
    this.running ??= this.roundNow()
      .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'renewing or collecting sandbox reservations failed; retried next round'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async roundNow(): Promise<void> {
    const { reservations, clean, logger } = this.deps;
    await reservations.renew();
    for (const abandoned of await reservations.collectAbandoned()) {
      logger.warn({ sandboxId: abandoned.sandboxId, kind: abandoned.kind }, 'an API replica stopped renewing its reservation; cleaning up after it');
      await clean(abandoned).catch((error: unknown) => logger.error({ err: error, sandboxId: abandoned.sandboxId }, 'cleaning up after an abandoned reservation failed; the node reconcile removes what is left'));
    }
  }
}
