import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { DEFAULT_TEAM_NAME, TeamDirectory } from './team-directory.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('TeamDirectory', () => {
  it('answers one default team whose id is a UUID kept in the settings across reopenings of the data directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-'));
    dirs.push(dir);
    const first = await SqliteDatabase.open(dir);
    const teams = (await TeamDirectory.open(first)).teamsOfCaller();
    expect(teams).toHaveLength(1);
    expect(teams[0]).toEqual({ teamID: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/), name: DEFAULT_TEAM_NAME, isDefault: true });
    expect((await TeamDirectory.open(first)).teamsOfCaller()[0].teamID).toBe(teams[0].teamID);
    await first.close();
    const reopened = await SqliteDatabase.open(dir);
    expect((await TeamDirectory.open(reopened)).teamsOfCaller()[0].teamID).toBe(teams[0].teamID);
    await reopened.close();
  });

  it('two data directories get two different team ids', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-'));
      dirs.push(dir);
      const db = await SqliteDatabase.open(dir);
      ids.push((await TeamDirectory.open(db)).teamsOfCaller()[0].teamID);
      await db.close();
    }
    expect(ids[0]).not.toBe(ids[1]);
  });
});
