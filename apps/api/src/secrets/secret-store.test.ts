import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { type Db, openDatabase } from '../store/database.ts';
import { SecretCipher } from './secret-crypto.ts';
import { SecretStore } from './secret-store.ts';

const silent = pino({ level: 'silent' });
const opened: Array<{ db: Db; dir: string }> = [];
function database(): Db {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-secret-store-'));
  const db = openDatabase(dir);
  opened.push({ db, dir });
  return db;
}
afterEach(() => {
  for (const { db, dir } of opened.splice(0)) {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

const kindOf = (run: () => unknown): string | undefined => {
  try {
    run();
  } catch (error) {
    return error instanceof PlatformError ? error.kind : 'other';
  }
  return undefined;
};

describe('secret store', () => {
  it('creates, finds by id or any-case name, versions updates, resolves the value, removes', () => {
    const store = new SecretStore(database(), () => new SecretCipher(randomBytes(32)), silent);
    const created = store.create('OpenAI-Key', 'sk-1', { team: 'a' });
    expect(created).toMatchObject({ name: 'openai-key', currentVersion: 1, metadata: { team: 'a' } });
    expect(created.secretID).toMatch(/^sec_[0-9a-f]{24}$/);
    expect(store.require('OPENAI-KEY').secretID).toBe(created.secretID);
    expect(store.resolveSecret('openai-key')).toBe('sk-1');
    const updated = store.update(created.secretID, 'sk-2');
    expect(updated).toMatchObject({ currentVersion: 2, metadata: { team: 'a' } });
    expect(store.update('openai-key', 'sk-3', {}).metadata).toEqual({});
    expect(store.resolveSecret('openai-key')).toBe('sk-3');
    expect(kindOf(() => store.create('openai-key', 'x'))).toBe('conflict');
    store.remove('openai-key');
    expect(kindOf(() => store.require(created.secretID))).toBe('not_found');
    expect(store.resolveSecret('openai-key')).toBeUndefined();
  });

  it('rejects odd names, reserved prefixes, empty or huge values and oversized metadata without writing', () => {
    const store = new SecretStore(database(), () => new SecretCipher(randomBytes(32)), silent);
    for (const name of ['', 'a b', 'a{b}', 'a\nb', 'x'.repeat(129), 'sec_mine', 'ünï', '../x']) expect(kindOf(() => store.create(name, 'v'))).toBe('invalid');
    expect(kindOf(() => store.create('ok', ''))).toBe('invalid');
    expect(kindOf(() => store.create('ok', 'half \uD83D surrogate'))).toBe('invalid');
    expect(kindOf(() => store.create('ok', 'stray \uDE00'))).toBe('invalid');
    expect(store.create('emoji', 'a \uD83D\uDE00 b').currentVersion).toBe(1);
    expect(store.resolveSecret('emoji')).toBe('a \uD83D\uDE00 b');
    store.remove('emoji');
    expect(kindOf(() => store.create('ok', 'x'.repeat(64 * 1024 + 1)))).toBe('invalid');
    expect(kindOf(() => store.create('ok', 'v', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']))))).toBe('invalid');
    expect(kindOf(() => store.create('ok', 'v', { k: 'x'.repeat(1025) }))).toBe('invalid');
    expect(kindOf(() => store.require('sec_nothex'))).toBe('invalid');
    expect(store.list()).toEqual([]);
  });

  it('with another key: metadata readable and removable, writes and resolves refused clearly', () => {
    const db = database();
    const first = new SecretStore(db, () => new SecretCipher(randomBytes(32)), silent);
    first.create('kept', 'v');
    const other = new SecretStore(db, () => new SecretCipher(randomBytes(32)), silent);
    expect(other.keyMatches()).toBe(false);
    expect(other.list().map((s) => s.name)).toEqual(['kept']);
    expect(() => other.resolveSecret('kept')).toThrow(/another key/);
    expect(() => other.create('new', 'v')).toThrow(/another key/);
    expect(() => other.update('kept', 'v2')).toThrow(/another key/);
    expect(other.require('kept').currentVersion).toBe(1);
    other.remove('kept');
    expect(other.list()).toEqual([]);
  });
});
