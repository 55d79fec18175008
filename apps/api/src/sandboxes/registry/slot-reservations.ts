import { PlatformError } from '../../errors.ts';
import { teamSandboxQuotaReached } from '../../teams/team-quotas.ts';
import type { ReplicaChannel, Sql } from '../../store/sql.ts';

/** How long a reservation lives without its replica renewing it (a replica that died stops renewing). */
export const RESERVATION_TTL_MS = 15_000;
/** How often a replica renews its reservations and collects those of replicas that stopped renewing. */
export const RESERVATION_RENEW_MS = 3_000;

/** `create`: a sandbox being made (its container may exist before its record). `resume`: a container being booted for a record. */
export type ReservationKind = 'create' | 'resume';

export interface AbandonedReservation {
  sandboxId: string;
  kind: ReservationKind;
}

/**
 * Slots under TIDEPOOL_MAX_SANDBOXES and each team's TIDEPOOL_TEAM_MAX_SANDBOXES, shared by every API replica on one
 * database: a sandbox holding a container (its record's `container_id`) holds one, and so does every create or
 * filesystem resume in flight, as a reservation row owned by its replica (naming the sandbox's team). Taking a slot counts both under one cross-replica lock, so replicas racing for the last
 * slot get it once. Reservations are also the replicas' record of what they are making: one whose replica stopped
 * renewing it is collected by another replica, which cleans up what was left half-made.
 */
export class SlotReservations {
  constructor(
    private readonly sql: Sql,
    private readonly replicas: ReplicaChannel,
    /** This replica. */
    readonly owner: string,
  ) {}

  /**
   * Reserves a slot for `sandboxId`, made for `team.id`. Refused (TeamQuotaError) when the team's sandboxes holding
   * containers and its live reservations of every replica (counted or not: each is a sandbox of the team in the
   * making) leave it no room under `team.max`; then refused (limit) when the sandboxes holding containers, the counted
   * reservations of every replica and `localHeld` (this replica's warm-pool containers) leave none under `max`.
   * `counted: false` records the work without taking a platform slot (a warm-pool claim already holds this replica's
   * slot); it still takes the team's. Both counts and the insert happen under one cross-replica lock. `team.max`
   * undefined: the team's quota is the platform's limit, which it can never exceed first; it is not counted.
   */
  async reserve(sandboxId: string, kind: ReservationKind, limit: { max: number; localHeld: number; counted: boolean }, team: { id: string; max: number | undefined }): Promise<void> {
    const insert = (now: number): Promise<number> =>
      this.sql.run(
        `INSERT INTO sandbox_reservations (sandbox_id, kind, owner, counted, until_ms, team_id) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (sandbox_id) DO UPDATE SET kind = excluded.kind, owner = excluded.owner, counted = excluded.counted, until_ms = excluded.until_ms, team_id = excluded.team_id`,
        [sandboxId, kind, this.owner, limit.counted ? 1 : 0, now + RESERVATION_TTL_MS, team.id],
      );
    if (!limit.counted && team.max === undefined) {
      await insert(Date.now());
      return;
    }
    await this.replicas.withLock('sandbox-limit', async () => {
      const now = Date.now();
      if (team.max !== undefined) await this.requireTeamRoom(sandboxId, { id: team.id, max: team.max }, now);
      if (limit.counted) {
        const row = await this.sql.get<{ holding: number | string }>(
          `SELECT (SELECT COUNT(*) FROM sandboxes WHERE container_id IS NOT NULL)
                + (SELECT COUNT(*) FROM sandbox_reservations WHERE counted = 1 AND until_ms >= ? AND sandbox_id <> ?) AS holding`,
          [now, sandboxId],
        );
        const holding = Number(row?.holding ?? 0) + limit.localHeld;
        if (holding + 1 > limit.max) {
          throw new PlatformError('limit', `you have reached the maximum number of concurrent sandboxes (${limit.max}); kill or pause some and try again`);
        }
      }
      await insert(now);
    });
  }

  /** Refuses (TeamQuotaError) when the team's sandboxes holding containers and its live reservations leave it no room. */
  private async requireTeamRoom(sandboxId: string, team: { id: string; max: number }, now: number): Promise<void> {
    const row = await this.sql.get<{ holding: number | string }>(
      `SELECT (SELECT COUNT(*) FROM sandboxes WHERE team_id = ? AND container_id IS NOT NULL AND sandbox_id <> ?)
            + (SELECT COUNT(*) FROM sandbox_reservations r WHERE r.team_id = ? AND r.until_ms >= ? AND r.sandbox_id <> ?
                 AND NOT EXISTS (SELECT 1 FROM sandboxes s WHERE s.sandbox_id = r.sandbox_id AND s.container_id IS NOT NULL)) AS holding`,
      [team.id, sandboxId, team.id, now, sandboxId],
    );
    const holding = Number(row?.holding ?? 0);
    if (holding + 1 > team.max) throw teamSandboxQuotaReached(holding, team.max);
  }

  /** Ends this replica's reservation (the work is done or failed); `sql`: inside the transaction that stores the record. */
  async release(sandboxId: string, sql: Sql = this.sql): Promise<boolean> {
    return (await sql.run('DELETE FROM sandbox_reservations WHERE sandbox_id = ? AND owner = ?', [sandboxId, this.owner])) === 1;
  }

  /** Keeps this replica's reservations alive. */
  async renew(now = Date.now()): Promise<void> {
    await this.sql.run('UPDATE sandbox_reservations SET until_ms = ? WHERE owner = ?', [now + RESERVATION_TTL_MS, this.owner]);
  }

  /** Takes the reservations nobody renewed in time (each is handed to exactly one caller, of all replicas). */
  async collectAbandoned(now = Date.now()): Promise<AbandonedReservation[]> {
    const rows = await this.sql.all<{ sandbox_id: string; kind: ReservationKind }>('DELETE FROM sandbox_reservations WHERE until_ms < ? RETURNING sandbox_id, kind', [now]);
    return rows.map((r) => ({ sandboxId: r.sandbox_id, kind: r.kind }));
  }

  /** True while some replica's reservation for the sandbox is alive (its container is in the making: leave it). */
  async held(sandboxId: string, now = Date.now()): Promise<boolean> {
    return (await this.sql.get('SELECT 1 AS held FROM sandbox_reservations WHERE sandbox_id = ? AND until_ms >= ?', [sandboxId, now])) !== undefined;
  }
}
