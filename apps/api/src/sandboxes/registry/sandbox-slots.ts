import { PlatformError } from '../../errors.ts';
import type { SandboxRegistry } from './sandbox-registry.ts';
import type { ReservationKind } from './slot-reservations.ts';
import { TeamSandboxSlots } from './team-sandbox-slots.ts';

/** Gives a slot back (creates and resumes call it once, when they are done either way). */
export type SlotRelease = (howMany?: number) => void;

export interface SlotLimits {
  /** TIDEPOOL_MAX_SANDBOXES. */
  maxSandboxes: number;
  /** TIDEPOOL_TEAM_MAX_SANDBOXES (default: the platform's limit). */
  teamMaxSandboxes?: number;
}

/**
 * The slots under TIDEPOOL_MAX_SANDBOXES and each team's TIDEPOOL_TEAM_MAX_SANDBOXES. A sandbox whose record holds a
 * container holds one; so does every creation or filesystem resume in flight, and every warm-pool container. Alone
 * (SQLite) the slots of work in flight are counted here; with a shared database they are reservation rows every
 * replica counts (the registry's SlotReservations), and only this process's warm-pool containers are counted here.
 */
export class SandboxSlots {
  /** Slots this process holds outside the store: creations in flight (one process), warm-pool containers (both). */
  private reserved = 0;
  /** One process: each team's slots; a shared database counts them in the reservations. */
  private readonly teamSlots: TeamSandboxSlots;
  private readonly maxSandboxes: number;
  private readonly teamMaxSandboxes: number;
  /**
   * False when the team quota is the platform's limit (its default): it can never bind before the platform's, so it is
   * not checked at all and a full platform is refused with the platform's own message, as on a single-team install.
   */
  private readonly teamQuotaBinds: boolean;

  constructor(
    private readonly registry: Pick<SandboxRegistry, 'all' | 'reservations'>,
    limits: SlotLimits,
  ) {
    this.maxSandboxes = limits.maxSandboxes;
    this.teamMaxSandboxes = limits.teamMaxSandboxes ?? limits.maxSandboxes;
    this.teamSlots = new TeamSandboxSlots(this.teamMaxSandboxes, () => registry.all());
    this.teamQuotaBinds = this.teamMaxSandboxes < this.maxSandboxes;
  }

  /**
   * One slot for a create or filesystem resume of `sandboxId`, made for `teamId`: the team's slot first (TeamQuotaError
   * when the team holds its quota), then the platform's (limit error when none is free). With a shared database both
   * are a reservation row every replica counts (`counted: false`: no platform slot taken, the team's still is); else
   * they are held here.
   */
  async reserveFor(sandboxId: string, teamId: string, kind: ReservationKind, counted = true): Promise<SlotRelease> {
    const reservations = this.registry.reservations;
    if (!reservations) {
      const team = this.teamQuotaBinds ? this.teamSlots.take(sandboxId, teamId) : () => undefined;
      if (!counted) return team;
      try {
        const platform = this.reserveSlots(1);
        return (howMany) => {
          platform(howMany);
          team();
        };
      } catch (error) {
        team();
        throw error;
      }
    }
    await reservations.reserve(sandboxId, kind, { max: this.maxSandboxes, localHeld: this.reserved, counted }, { id: teamId, max: this.teamQuotaBinds ? this.teamMaxSandboxes : undefined });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Gone already when the create stored its record; a failed delete expires with the reservation's TTL.
      void reservations.release(sandboxId).catch(() => undefined);
    };
  }

  /** Slots not held by a sandbox, a creation in flight or a pooled container. */
  freeSlots(): number {
    return Math.max(0, this.maxSandboxes - this.holding());
  }

  /**
   * Takes `count` slots. Sandboxes that hold a container (running, or paused with memory) count
   * against the limit, and so do creations and filesystem resumes in flight; one paused to an image holds nothing.
   */
  reserveSlots(count = 1): SlotRelease {
    if (this.holding() + count > this.maxSandboxes) {
      throw new PlatformError('limit', `you have reached the maximum number of concurrent sandboxes (${this.maxSandboxes}); kill or pause some and try again`);
    }
    this.reserved += count;
    let released = 0;
    return (howMany = count - released) => {
      const giving = Math.min(howMany, count - released);
      this.reserved -= giving;
      released += giving;
    };
  }

  /** Slots held now: records holding a container, and what this process holds outside the store. */
  private holding(): number {
    let holding = this.reserved;
    for (const record of this.registry.all()) if (record.containerId) holding += 1;
    return holding;
  }
}
