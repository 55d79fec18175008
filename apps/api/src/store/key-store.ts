import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { settingOrCreate } from './settings.ts';
import type { Sql } from './sql.ts';

const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** API keys (stored as hashes) and platform secrets such as the token seed. */
export class KeyStore {
  constructor(private readonly sql: Sql) {}

  /** The secret from which sandbox tokens are derived; created once and kept. */
  tokenSeed(): Promise<string> {
    return this.setting('token_seed', () => randomBytes(32).toString('hex'));
  }

  /** Identity of this platform (of its database): labels its containers so other platforms leave them alone. */
  platformId(): Promise<string> {
    return this.setting('platform_id', () => randomBytes(8).toString('hex'));
  }

  private setting(key: string, create: () => string): Promise<string> {
    return settingOrCreate(this.sql, key, create);
  }

  async addKey(key: string): Promise<void> {
    await this.sql.run('INSERT INTO api_keys (hash, prefix, created_at) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING', [hashKey(key), key.slice(0, 8), new Date().toISOString()]);
  }

  async hasKeys(): Promise<boolean> {
    return (await this.sql.get('SELECT 1 AS one FROM api_keys LIMIT 1')) !== undefined;
  }

  /** Creates a new `e2b_` + 40 hex key, stores its hash and returns it (the only time it is visible). */
  async generateKey(): Promise<string> {
    const key = `e2b_${randomBytes(20).toString('hex')}`;
    await this.addKey(key);
    return key;
  }

  async isValid(key: string): Promise<boolean> {
    const hash = Buffer.from(hashKey(key), 'hex');
    const rows = await this.sql.all<{ hash: string }>('SELECT hash FROM api_keys');
    return rows.some((row) => timingSafeEqual(Buffer.from(row.hash, 'hex'), hash));
  }
}
