import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { SecretCipher } from './secret-crypto.ts';
import { SecretStore } from './secret-store.ts';

const silent = pino({ level: 'silent' });
const opened: Array<{ db: SqliteDatabase; dir: string }> = [];
function database(): SqliteDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-secret-store-'));
  const db = SqliteDatabase.open(dir);
  opened.push({ db, dir });
  return db;
}
afterEach(async () => {
  for (const { db, dir } of opened.splice(0)) {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

const kindOf = async (run: () => Promise<unknown>): Promise<string | undefined> => {
  try {
    await run();
  } catch (error) {
    return error instanceof PlatformError ? error.kind : 'other';
  }
  return undefined;
};

describe('secret store', () => {
  it('creates, finds by id or any-case name, versions updates, resolves the value, removes', async () => {
    const store = await SecretStore.open(database(), () => new SecretCipher(randomBytes(32)), silent);
    const created = await store.create('team-a', 'OpenAI-Key', 'sk-1', { team: 'a' });
    expect(created).toMatchObject({ name: 'openai-key', currentVersion: 1, metadata: { team: 'a' } });
    expect(created.secretID).toMatch(/^sec_[0-9a-f]{24}$/);
    expect((await store.require('team-a', 'OPENAI-KEY')).secretID).toBe(created.secretID);
    expect((await store.resolveSecret('team-a', 'openai-key'))).toBe('sk-1');
    const updated = await store.update('team-a', created.secretID, 'sk-2');
    expect(updated).toMatchObject({ currentVersion: 2, metadata: { team: 'a' } });
    expect((await store.update('team-a', 'openai-key', 'sk-3', {})).metadata).toEqual({});
    expect((await store.resolveSecret('team-a', 'openai-key'))).toBe('sk-3');
    expect((await kindOf(() => store.create('team-a', 'openai-key', 'x')))).toBe('conflict');
    await store.remove('team-a', 'openai-key');
    expect((await kindOf(() => store.require('team-a', created.secretID)))).toBe('not_found');
    expect((await store.resolveSecret('team-a', 'openai-key'))).toBeUndefined();
  });

  it('rejects odd names, reserved prefixes, empty or huge values and oversized metadata without writing', async () => {
    const store = await SecretStore.open(database(), () => new SecretCipher(randomBytes(32)), silent);
    for (const name of ['', 'a b', 'a{b}', 'a\nb', 'x'.repeat(129), 'sec_mine', 'ünï', '../x']) expect((await kindOf(() => store.create('team-a', name, 'v')))).toBe('invalid');
    expect((await kindOf(() => store.create('team-a', 'ok', '')))).toBe('invalid');
    expect((await kindOf(() => store.create('team-a', 'ok', 'half \uD83D surrogate')))).toBe('invalid');
    expect((await kindOf(() => store.create('team-a', 'ok', 'stray \uDE00')))).toBe('invalid');
    expect((await store.create('team-a', 'emoji', 'a \uD83D\uDE00 b')).currentVersion).toBe(1);
    expect((await store.resolveSecret('team-a', 'emoji'))).toBe('a \uD83D\uDE00 b');
    await store.remove('team-a', 'emoji');
    expect((await kindOf(() => store.create('team-a', 'ok', 'x'.repeat(64 * 1024 + 1))))).toBe('invalid');
    expect((await kindOf(() => store.create('team-a', 'ok', 'v', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])))))).toBe('invalid');
    expect((await kindOf(() => store.create('team-a', 'ok', 'v', { k: 'x'.repeat(1025) })))).toBe('invalid');
    expect((await kindOf(() => store.require('team-a', 'sec_nothex')))).toBe('invalid');
    expect((await store.list('team-a'))).toEqual([]);
  });

  it("one team's secrets are invisible to another: same names allowed, lookups by name or id answer not found", async () => {
    const store = await SecretStore.open(database(), () => new SecretCipher(randomBytes(32)), silent);
    const mine = await store.create('team-a', 'shared-name', 'a-value');
    await store.create('team-b', 'shared-name', 'b-value');
    expect(await store.resolveSecret('team-a', 'shared-name')).toBe('a-value');
    expect(await store.resolveSecret('team-b', 'shared-name')).toBe('b-value');
    expect(await store.resolveSecret('team-c', 'shared-name')).toBeUndefined();
    expect(await kindOf(() => store.require('team-b', mine.secretID))).toBe('not_found');
    expect(await kindOf(() => store.update('team-b', mine.secretID, 'stolen'))).toBe('not_found');
    expect(await kindOf(() => store.remove('team-c', mine.secretID))).toBe('not_found');
    expect((await store.list('team-c'))).toEqual([]);
    expect([...(await store.names('team-b'))]).toEqual(['shared-name']);
    expect(await store.resolveSecret('team-a', 'shared-name')).toBe('a-value');
  });

  it('with another key: metadata readable and removable, writes and resolves refused clearly', async () => {
    const db = database();
    const first = await SecretStore.open(db, () => new SecretCipher(randomBytes(32)), silent);
    await first.create('team-a', 'kept', 'v');
    const other = await SecretStore.open(db, () => new SecretCipher(randomBytes(32)), silent);
    expect((await other.keyMatches())).toBe(false);
    expect((await other.list('team-a')).map((s) => s.name)).toEqual(['kept']);
    await expect(other.resolveSecret('team-a', 'kept')).rejects.toThrow(/another key/);
    await expect(other.create('team-a', 'new', 'v')).rejects.toThrow(/another key/);
    await expect(other.update('team-a', 'kept', 'v2')).rejects.toThrow(/another key/);
    expect((await other.require('team-a', 'kept')).currentVersion).toBe(1);
    await other.remove('team-a', 'kept');
    expect((await other.list('team-a'))).toEqual([]);
  });
});
