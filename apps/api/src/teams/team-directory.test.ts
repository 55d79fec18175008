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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-'));
  dirs.push(dir);
  return dir;
}

describe('TeamDirectory', () => {
  it('has one default team whose id is a UUID kept across reopenings of the data directory', async () => {
    const dir = freshDir();
    const first = await SqliteDatabase.open(dir);
    const teams = await (await TeamDirectory.open(first)).teams();
    expect(teams).toEqual([{ teamID: expect.stringMatching(UUID), name: DEFAULT_TEAM_NAME, isDefault: true, createdAt: expect.any(String) }]);
    expect((await TeamDirectory.open(first)).defaultTeamId).toBe(teams[0]!.teamID);
    await first.close();
    const reopened = await SqliteDatabase.open(dir);
    expect((await TeamDirectory.open(reopened)).defaultTeamId).toBe(teams[0]!.teamID);
    await reopened.close();
  });

  it('two data directories get two different default team ids', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i += 1) {
      const db = await SqliteDatabase.open(freshDir());
      ids.push((await TeamDirectory.open(db)).defaultTeamId);
      await db.close();
    }
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('creates teams that are not the default and finds them by id', async () => {
    const db = await SqliteDatabase.open(freshDir());
    const directory = await TeamDirectory.open(db);
    const made = await directory.createTeam('research');
    expect(made).toMatchObject({ teamID: expect.stringMatching(UUID), name: 'research', isDefault: false });
    expect(await directory.team(made.teamID)).toEqual(made);
    expect(await directory.team('no-such-team')).toBeUndefined();
    expect((await directory.teams()).map((t) => t.name)).toEqual(['default', 'research']);
    await db.close();
  });
});
