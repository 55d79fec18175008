import { randomUUID } from 'node:crypto';
import { settingOrCreate } from '../store/settings.ts';
import type { Sql } from '../store/sql.ts';

/** A team as the platform knows it: keys, sandboxes, templates, volumes and secrets belong to one. */
export interface Team {
  teamID: string;
  name: string;
  isDefault: boolean;
  createdAt: string;
}

export const DEFAULT_TEAM_NAME = 'default';
const DEFAULT_TEAM_SETTING = 'default_team_id';

interface TeamRow {
  team_id: string;
  name: string;
  created_at: string;
}

/**
 * The teams table. The default team (its id a UUID kept in the settings, made by the teams migration) holds what
 * existed before teams and the keys of TIDEPOOL_API_KEYS and the first start.
 */
export class TeamDirectory {
  private constructor(
    private readonly sql: Sql,
    readonly defaultTeamId: string,
  ) {}

  /** Reads the default team's id from the settings (making it and its row on first use). */
  static async open(sql: Sql): Promise<TeamDirectory> {
    const id = await settingOrCreate(sql, DEFAULT_TEAM_SETTING, () => randomUUID());
    await sql.run('INSERT INTO teams (team_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT (team_id) DO NOTHING', [id, DEFAULT_TEAM_NAME, new Date().toISOString()]);
    return new TeamDirectory(sql, id);
  }

  private view(row: TeamRow): Team {
    return { teamID: row.team_id, name: row.name, isDefault: row.team_id === this.defaultTeamId, createdAt: row.created_at };
  }

  async team(teamId: string): Promise<Team | undefined> {
    const row = await this.sql.get<TeamRow>('SELECT team_id, name, created_at FROM teams WHERE team_id = ?', [teamId]);
    return row && this.view(row);
  }

  /** Every team, oldest first. */
  async teams(): Promise<Team[]> {
    return (await this.sql.all<TeamRow>('SELECT team_id, name, created_at FROM teams ORDER BY created_at, team_id')).map((row) => this.view(row));
  }

  async createTeam(name: string): Promise<Team> {
    const row: TeamRow = { team_id: randomUUID(), name, created_at: new Date().toISOString() };
    await this.sql.run('INSERT INTO teams (team_id, name, created_at) VALUES (?, ?, ?)', [row.team_id, row.name, row.created_at]);
    return this.view(row);
  }
}
