import { randomUUID } from 'node:crypto';
import type { Db } from '../store/database.ts';
import { settingOrCreate } from '../store/settings.ts';

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
  private readonly defaultTeamId: string;

  constructor(db: Db) {
    this.defaultTeamId = settingOrCreate(db, DEFAULT_TEAM_SETTING, () => randomUUID());
  }

  /** The teams of the holder of a valid API key (the caller's one team). */
  teamsOfCaller(): Team[] {
    return [{ teamID: this.defaultTeamId, name: DEFAULT_TEAM_NAME, isDefault: true }];
  }
}
