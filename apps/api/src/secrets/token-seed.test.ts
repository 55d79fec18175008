import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { deriveTokenSeed, loadTokenSeed, TokenSeedError, tokenSeedCheck } from './token-seed.ts';

const logger = pino({ level: 'silent' });
const dirs: string[] = [];
const dbs: SqliteDatabase[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'tp-token-seed-'));
  dirs.push(dir);
  return dir;
};
const openDb = async (dir: string): Promise<SqliteDatabase> => {
  const db = await SqliteDatabase.open(dir);
  dbs.push(db);
  return db;
};
const setting = async (db: SqliteDatabase, key: string): Promise<string | undefined> => (await db.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [key]))?.value;

afterEach(async () => {
  for (const db of dbs.splice(0)) await db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('the token seed (never in the database)', () => {
  it('is derived from the secrets key: replicas sharing the key agree, one with another key is refused', async () => {
    const dir = tempDir();
    const db = await openDb(dir);
    const key = randomBytes(32);
    const seed = await loadTokenSeed({ sql: db, dataDir: dir, seedFile: '', secretsKey: () => key, logger });
    expect(seed).toMatch(/^[0-9a-f]{64}$/);
    expect(seed).toBe(deriveTokenSeed(key));
    // The database keeps a check value only: neither the seed nor anything it is derived from.
    expect(await setting(db, 'token_seed')).toBeUndefined();
    expect(await setting(db, 'token_seed_check')).toBe(tokenSeedCheck(seed));
    expect(JSON.stringify(await db.all('SELECT * FROM settings'))).not.toContain(seed);
    expect(await loadTokenSeed({ sql: db, dataDir: tempDir(), seedFile: '', secretsKey: () => Buffer.from(key), logger })).toBe(seed);
    const other = loadTokenSeed({ sql: db, dataDir: tempDir(), seedFile: '', secretsKey: () => randomBytes(32), logger });
    await expect(other).rejects.toThrow(TokenSeedError);
    await expect(other).rejects.toThrow(/TIDEPOOL_SECRETS_KEY.*not the one this database's sandboxes were given/s);
  });

  it('keeps a derived seed in the data directory (0600): a later change of the secrets key leaves the tokens as they are', async () => {
    const dir = tempDir();
    const db = await openDb(dir);
    const seed = await loadTokenSeed({ sql: db, dataDir: dir, seedFile: '', secretsKey: () => randomBytes(32), logger });
    const file = join(dir, 'token-seed');
    expect(readFileSync(file, 'utf8').trim()).toBe(seed);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await loadTokenSeed({ sql: db, dataDir: dir, seedFile: '', secretsKey: () => randomBytes(32), logger })).toBe(seed);
  });

  it('moves an older database\'s seed out once (into <data dir>/token-seed, 0600) and deletes it there', async () => {
    const dir = tempDir();
    const db = await openDb(dir);
    const legacy = randomBytes(32).toString('hex');
    await db.run('INSERT INTO settings (key, value) VALUES (?, ?)', ['token_seed', legacy]);
    const key = randomBytes(32);
    expect(await loadTokenSeed({ sql: db, dataDir: dir, seedFile: '', secretsKey: () => key, logger })).toBe(legacy);
    const file = join(dir, 'token-seed');
    expect(readFileSync(file, 'utf8').trim()).toBe(legacy);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await setting(db, 'token_seed')).toBeUndefined();
    // The next start reads the file; a replica with only the secrets key is refused (its derived seed is another).
    expect(await loadTokenSeed({ sql: db, dataDir: dir, seedFile: '', secretsKey: () => key, logger })).toBe(legacy);
    await expect(loadTokenSeed({ sql: db, dataDir: tempDir(), seedFile: '', secretsKey: () => key, logger })).rejects.toThrow(/TIDEPOOL_TOKEN_SEED_FILE/);
    // Given the moved file, another replica agrees.
    expect(await loadTokenSeed({ sql: db, dataDir: tempDir(), seedFile: file, secretsKey: () => randomBytes(32), logger })).toBe(legacy);
  });

  it('moves it into TIDEPOOL_TOKEN_SEED_FILE when set; a file holding another seed is refused and the database keeps its own', async () => {
    const dir = tempDir();
    const db = await openDb(dir);
    const legacy = randomBytes(32).toString('hex');
    await db.run('INSERT INTO settings (key, value) VALUES (?, ?)', ['token_seed', legacy]);
    const wrong = join(tempDir(), 'seed');
    writeFileSync(wrong, `${randomBytes(32).toString('hex')}\n`);
    await expect(loadTokenSeed({ sql: db, dataDir: dir, seedFile: wrong, secretsKey: () => randomBytes(32), logger })).rejects.toThrow(/TIDEPOOL_TOKEN_SEED_FILE: .* holds a token seed other than/);
    expect(await setting(db, 'token_seed')).toBe(legacy);
    const target = join(tempDir(), 'token-seed-file');
    expect(await loadTokenSeed({ sql: db, dataDir: dir, seedFile: target, secretsKey: () => randomBytes(32), logger })).toBe(legacy);
    expect(readFileSync(target, 'utf8').trim()).toBe(legacy);
    expect(existsSync(join(dir, 'token-seed'))).toBe(false);
    expect(await setting(db, 'token_seed')).toBeUndefined();
  });

  it('refuses a seed file that is not 64 hex characters, naming the setting', async () => {
    const dir = tempDir();
    const db = await openDb(dir);
    const file = join(dir, 'bad-seed');
    writeFileSync(file, 'not a seed\n');
    await expect(loadTokenSeed({ sql: db, dataDir: dir, seedFile: file, secretsKey: () => randomBytes(32), logger })).rejects.toThrow(/TIDEPOOL_TOKEN_SEED_FILE: .* 64 lower-case hex/);
  });
});
