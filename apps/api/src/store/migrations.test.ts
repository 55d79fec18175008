import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from './migrations.ts';

describe('the migration list', () => {
  it('numbers its records 1, 2, 3 … with no gap or repeat, each saying what it is for in both dialects', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, index) => index + 1));
    for (const migration of MIGRATIONS) {
      expect(migration.about.trim(), `migration ${migration.version}`).not.toBe('');
      expect(migration.sqlite.trim(), `migration ${migration.version} (SQLite)`).not.toBe('');
      expect(migration.postgres.trim(), `migration ${migration.version} (PostgreSQL)`).not.toBe('');
    }
  });

  it('writes each dialect in its own words (no PostgreSQL-only syntax in SQLite text and back)', () => {
    for (const { version, sqlite, postgres } of MIGRATIONS) {
      expect(sqlite, `migration ${version}`).not.toMatch(/\b(BYTEA|BIGINT GENERATED|gen_random_uuid|plpgsql)\b/);
      expect(postgres, `migration ${version}`).not.toMatch(/\b(AUTOINCREMENT|randomblob|strftime)\b|\bBLOB\b/);
    }
  });
});
