import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../store/database.ts';
import { DEFAULT_TEAM_NAME, TeamDirectory } from './team-directory.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('TeamDirectory', () => {
  it('answers one default team whose id is a UUID kept in the settings across reopenings of the data directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-'));
    dirs.push(dir);
    const first = openDatabase(dir);
    const teams = new TeamDirectory(first).teamsOfCaller();
    expect(teams).toHaveLength(1);
    expect(teams[0]).toEqual({ teamID: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/), name: DEFAULT_TEAM_NAME, isDefault: true });
    expect(new TeamDirectory(first).teamsOfCaller()[0].teamID).toBe(teams[0].teamID);
    first.close();
    const reopened = openDatabase(dir);
    expect(new TeamDirectory(reopened).teamsOfCaller()[0].teamID).toBe(teams[0].teamID);
    reopened.close();
  });

  it('two data directories get two different team ids', () => {
    const ids = [0, 1].map(() => {
      const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-'));
      dirs.push(dir);
      const db = openDatabase(dir);
      const id = new TeamDirectory(db).teamsOfCaller()[0].teamID;
      db.close();
      return id;
    });
    expect(ids[0]).not.toBe(ids[1]);
  });
});
