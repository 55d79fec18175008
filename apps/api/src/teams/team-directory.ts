import { randomUUID } from 'node:crypto';
import { settingOrCreate } from '../store/settings.ts';
import type { Sql } from '../store/sql.ts';

/** A team as the platform knows it. Tidepool has one team for now: every API key belongs to it. */
export interface Team {
  teamID: string;
  name: string;
  isDefault: boolean;
}

export const DEFAULT_TEAM_NAME = 'default';
const DEFAULT_TEAM_SETTING = 'default_team_id';

/** The teams a caller belongs to. One default team whose id is made once (a UUID) and kept in the settings table. */
export class TeamDirectory {
  private constructor(private readonly defaultTeamId: string) {}

  /** Reads the default team's id from the settings (making it on first use). */
  static async open(sql: Sql): Promise<TeamDirectory> {
    return new TeamDirectory(await settingOrCreate(sql, DEFAULT_TEAM_SETTING, () => randomUUID()));
  }

  /** The teams of the holder of a valid API key (the caller's one team). */
  teamsOfCaller(): Team[] {
    return [{ teamID: this.defaultTeamId, name: DEFAULT_TEAM_NAME, isDefault: true }];
  }
}
