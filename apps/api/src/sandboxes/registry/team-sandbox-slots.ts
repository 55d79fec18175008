import { teamSandboxQuotaReached } from '../../teams/team-quotas.ts';
import type { SandboxRecord } from './sandbox-record.ts';

/**
 * TIDEPOOL_TEAM_MAX_SANDBOXES in one process (SQLite): a team holds one slot per sandbox of its that holds a
 * container (running, or paused in memory) and one per sandbox of its being made (create, filesystem resume, fork,
 * warm-pool claim) that no record holds a container for yet. Taking a slot counts and takes in one synchronous step,
 * so concurrent creates of one team cannot overshoot. With API replicas on one database the same count is made from
 * the store instead (slot-reservations.ts).
 */
export class TeamSandboxSlots {
  /** Sandboxes being made, by id → their team (one object per take, so a stale release cannot end a later take). */
  private readonly making = new Map<string, { teamId: string }>();

  constructor(
    readonly max: number,
    private readonly records: () => Iterable<SandboxRecord>,
  ) {}

  /** Slots `teamId` holds now, leaving out `except` (the sandbox asking again: a resume whose record is counted here). */
  holding(teamId: string, except?: string): number {
    const withContainer = new Set<string>();
    for (const record of this.records()) {
      if (record.teamId === teamId && record.containerId && record.sandboxId !== except) withContainer.add(record.sandboxId);
    }
    let count = withContainer.size;
    for (const [sandboxId, taken] of this.making) if (taken.teamId === teamId && sandboxId !== except && !withContainer.has(sandboxId)) count += 1;
    return count;
  }

  /** One slot for `sandboxId`, being made for `teamId` (TeamQuotaError when the team holds its quota); the release is idempotent. */
  take(sandboxId: string, teamId: string): () => void {
    const holding = this.holding(teamId, sandboxId);
    if (holding + 1 > this.max) throw teamSandboxQuotaReached(holding, this.max);
    const taken = { teamId };
    this.making.set(sandboxId, taken);
    return () => {
      if (this.making.get(sandboxId) === taken) this.making.delete(sandboxId);
    };
  }
}
