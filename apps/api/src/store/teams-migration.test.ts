import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { TeamDirectory } from '../teams/team-directory.ts';
import { KeyStore } from './key-store.ts';
import { MIGRATIONS } from './migrations.ts';
import { SqliteDatabase } from './sqlite-database.ts';

const TEAMS_MIGRATION = 6;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A data directory as the platform left it before teams: migrations 1–5 applied, one row of each kind. */
function dataDirBeforeTeams(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-teams-migration-'));
  dirs.push(dir);
  const db = new BetterSqlite3(join(dir, 'tidepool.db'));
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
  for (const { version, sqlite } of MIGRATIONS.filter((m) => m.version < TEAMS_MIGRATION)) {
    db.exec(sqlite);
    db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(version, 'then');
  }
  db.exec(`
    INSERT INTO api_keys (hash, prefix, created_at) VALUES ('${'ab'.repeat(32)}', 'e2b_1234', 'then');
    INSERT INTO templates (template_id, alias, public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at) VALUES ('base', 'base', 1, 2, 1024, 0, 'then', 'then');
    INSERT INTO templates (template_id, alias, public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at) VALUES ('tpl1', 'mine', 0, 2, 1024, 0, 'then', 'then');
    INSERT INTO volumes (volume_id, name, token, created_at) VALUES ('vol_1', 'data', 't', 'then');
    INSERT INTO secrets (secret_id, name, version, sealed, metadata, created_at, updated_at) VALUES ('sec_1', 'token', 1, x'00', '{}', 'then', 'then');
    INSERT INTO sandboxes (sandbox_id, template_id, state, started_at, end_at, timeout_seconds, cpu_count, memory_mb, disk_size_mb, envd_version,
      envd_access_token, metadata, env_vars, network, auto_pause, auto_pause_memory, auto_resume)
      VALUES ('isbx1', 'tpl1', 'paused', 'then', 'then', 60, 1, 256, 0, '0.1.0', 'tok', '{}', '{}', '{}', 0, 1, 0);
  `);
  db.close();
  return dir;
}

describe('migration 6 (teams)', () => {
  it('puts every existing key, sandbox, template, volume and secret in the default team; built-ins stay team-less', async () => {
    const db = SqliteDatabase.open(dataDirBeforeTeams());
    const teams = await TeamDirectory.open(db);
    const defaultTeam = teams.defaultTeamId;
    expect(defaultTeam).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await teams.teams()).toEqual([{ teamID: defaultTeam, name: 'default', isDefault: true, createdAt: expect.any(String) }]);
    for (const table of ['sandboxes', 'volumes', 'secrets']) {
      expect(await db.all(`SELECT team_id FROM ${table}`)).toEqual([{ team_id: defaultTeam }]);
    }
    expect(await db.all('SELECT template_id, team_id FROM templates ORDER BY template_id')).toEqual([
      { template_id: 'base', team_id: null },
      { template_id: 'tpl1', team_id: defaultTeam },
    ]);
    const keys = await new KeyStore(db).keysOf(defaultTeam);
    expect(keys).toEqual([{ keyId: `key_${'ab'.repeat(12)}`, teamId: defaultTeam, name: 'key', prefix: 'e2b_1234', suffix: '', createdAt: 'then' }]);
    await db.close();
  });

  it('volume and secret names become unique per team, not platform-wide', async () => {
    const db = SqliteDatabase.open(dataDirBeforeTeams());
    await db.run("INSERT INTO volumes (volume_id, team_id, name, token, created_at) VALUES ('vol_2', 'other-team', 'data', 't', 'now')");
    await db.run("INSERT INTO secrets (secret_id, team_id, name, version, sealed, metadata, created_at, updated_at) VALUES ('sec_2', 'other-team', 'token', 1, x'00', '{}', 'now', 'now')");
    await expect(db.run("INSERT INTO volumes (volume_id, team_id, name, token, created_at) VALUES ('vol_3', 'other-team', 'data', 't', 'now')")).rejects.toThrow(/UNIQUE/);
    await expect(
      db.run("INSERT INTO secrets (secret_id, team_id, name, version, sealed, metadata, created_at, updated_at) VALUES ('sec_3', 'other-team', 'token', 1, x'00', '{}', 'now', 'now')"),
    ).rejects.toThrow(/UNIQUE/);
    await db.close();
  });
});
