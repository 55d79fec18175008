import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Db } from './database.ts';
import { settingOrCreate } from './settings.ts';

const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** API keys (stored as hashes) and platform secrets such as the token seed. */
export class KeyStore {
  constructor(private readonly db: Db) {}

  /** The secret from which sandbox tokens are derived; created once and kept. */
  tokenSeed(): string {
    return this.setting('token_seed', () => randomBytes(32).toString('hex'));
  }

  /** Identity of this platform (of its data directory): labels its containers so other platforms leave them alone. */
  platformId(): string {
    return this.setting('platform_id', () => randomBytes(8).toString('hex'));
  }

  private setting(key: string, create: () => string): string {
    return settingOrCreate(this.db, key, create);
  }

  addKey(key: string): void {
    this.db.prepare('INSERT OR IGNORE INTO api_keys (hash, prefix, created_at) VALUES (?, ?, ?)').run(hashKey(key), key.slice(0, 8), new Date().toISOString());
  }

  hasKeys(): boolean {
    return this.db.prepare('SELECT 1 FROM api_keys LIMIT 1').get() !== undefined;
  }

  /** Creates a new `e2b_` + 40 hex key, stores its hash and returns it (the only time it is visible). */
  generateKey(): string {
    const key = `e2b_${randomBytes(20).toString('hex')}`;
    this.addKey(key);
    return key;
  }

  isValid(key: string): boolean {
    const hash = Buffer.from(hashKey(key), 'hex');
    const rows = this.db.prepare('SELECT hash FROM api_keys').all() as { hash: string }[];
    return rows.some((row) => timingSafeEqual(Buffer.from(row.hash, 'hex'), hash));
  }
}
