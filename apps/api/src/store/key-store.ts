import { createHash, randomBytes } from 'node:crypto';
import { settingOrCreate } from './settings.ts';
import type { Sql } from './sql.ts';

const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** Who holds a valid API key: the key's id (for revocation and logs) and its team. */
export interface KeyHolder {
  keyId: string;
  teamId: string;
}

/** What is kept of a key besides its hash: enough to recognise it (`e2b_1a2b…9f8e`), never enough to use it. */
export interface StoredKeyInfo {
  keyId: string;
  teamId: string;
  name: string;
  /** The key's first 8 characters (`e2b_` and 4 hex digits). */
  prefix: string;
  /** Its last 4 characters ('' for keys stored before teams existed). */
  suffix: string;
  createdAt: string;
}

interface KeyRow {
  key_id: string;
  team_id: string;
  name: string;
  prefix: string;
  suffix: string;
  created_at: string;
}

const infoOf = (row: KeyRow): StoredKeyInfo => ({ keyId: row.key_id, teamId: row.team_id, name: row.name, prefix: row.prefix, suffix: row.suffix, createdAt: row.created_at });

/** The length of a generated key: `e2b_` + 40 hex digits. */
export const GENERATED_KEY_LENGTH = 44;

/** API keys (stored as SHA-256 hashes, each belonging to one team) and the platform id. The token seed is not here: secrets/token-seed.ts. */
export class KeyStore {
  constructor(private readonly sql: Sql) {}

  /** Identity of this platform (of its database): labels its containers so other platforms leave them alone. */
  platformId(): Promise<string> {
    return this.setting('platform_id', () => randomBytes(8).toString('hex'));
  }

  private setting(key: string, create: () => string): Promise<string> {
    return settingOrCreate(this.sql, key, create);
  }

  /** Stores a key for `teamId`; a key already stored keeps its team (configured keys are re-added at every start). */
  async addKey(key: string, teamId: string, name = 'configured'): Promise<StoredKeyInfo> {
    const hash = hashKey(key);
    await this.sql.run(
      'INSERT INTO api_keys (hash, prefix, created_at, key_id, team_id, name, suffix) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING',
      [hash, key.slice(0, 8), new Date().toISOString(), `key_${randomBytes(12).toString('hex')}`, teamId, name, key.length >= 12 ? key.slice(-4) : ''],
    );
    const row = await this.sql.get<KeyRow>('SELECT key_id, team_id, name, prefix, suffix, created_at FROM api_keys WHERE hash = ?', [hash]);
    if (!row) throw new Error('store: an API key vanished right after it was written');
    return infoOf(row);
  }

  async hasKeys(): Promise<boolean> {
    return (await this.sql.get('SELECT 1 AS one FROM api_keys LIMIT 1')) !== undefined;
  }

  /** Creates a new `e2b_` + 40 hex key for the team, stores its hash and returns it (the only time it is visible). */
  async generateKey(teamId: string, name = 'generated'): Promise<{ key: string; info: StoredKeyInfo }> {
    const key = `e2b_${randomBytes(20).toString('hex')}`;
    return { key, info: await this.addKey(key, teamId, name) };
  }

  /**
   * The holder of `key`, or undefined. Looked up by hash (a SHA-256 of a 160-bit random key: its lookup time says
   * nothing usable about the key). Read at every request, so a revoked key stops working at the next one.
   */
  async authenticate(key: string): Promise<KeyHolder | undefined> {
    if (key === '') return undefined;
    const row = await this.sql.get<{ key_id: string; team_id: string }>('SELECT key_id, team_id FROM api_keys WHERE hash = ?', [hashKey(key)]);
    return row ? { keyId: row.key_id, teamId: row.team_id } : undefined;
  }

  /** True when `key` is some team's key. */
  async isValid(key: string): Promise<boolean> {
    return (await this.authenticate(key)) !== undefined;
  }

  /** The team's keys, oldest first (hashes stay inside). */
  async keysOf(teamId: string): Promise<StoredKeyInfo[]> {
    const rows = await this.sql.all<KeyRow>('SELECT key_id, team_id, name, prefix, suffix, created_at FROM api_keys WHERE team_id = ? ORDER BY created_at, key_id', [teamId]);
    return rows.map(infoOf);
  }

  /** Deletes one of the team's keys; false when the team has no such key. */
  async revoke(teamId: string, keyId: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM api_keys WHERE key_id = ? AND team_id = ?', [keyId, teamId])) === 1;
  }
}
