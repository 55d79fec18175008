import { PlatformError } from '../errors.ts';

/** What one team may use at once (TIDEPOOL_TEAM_*; config.ts gives the platform's own limits when unset). */
export interface TeamQuotas {
  /** Sandboxes holding a container (running, paused in memory) or being made. */
  maxSandboxes: number;
  /** Template builds `building` (running, or waiting for a build slot). */
  maxBuilds: number;
}

/**
 * One team reached one of its quotas: 429 with Retry-After and a message naming the quota. Nothing was made. Told
 * apart from the platform-wide limit (a plain 'limit' PlatformError), which a ready warm-pool container may give its
 * slot up for: a team over its own quota must not take slots from the pool.
 */
export class TeamQuotaError extends PlatformError {
  constructor(message: string, retryAfterSeconds: number) {
    super('limit', message, { retryAfterSeconds });
    this.name = 'TeamQuotaError';
  }
}

export function teamSandboxQuotaReached(holding: number, max: number): TeamQuotaError {
  return new TeamQuotaError(`team sandbox quota reached: ${holding} running (TIDEPOOL_TEAM_MAX_SANDBOXES=${max}); kill or pause some of the team's sandboxes and try again`, 1);
}

/** Builds take minutes: the retry is asked for later than a sandbox's. */
export function teamBuildQuotaReached(building: number, max: number): TeamQuotaError {
  return new TeamQuotaError(`team build quota reached: ${building} building (TIDEPOOL_TEAM_MAX_BUILDS=${max}); wait for one to finish and try again`, 10);
}
