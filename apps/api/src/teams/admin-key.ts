import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { Sql } from '../store/sql.ts';

const ADMIN_KEY_SETTING = 'admin_key_hash';
const sha256 = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * The platform administrator's key: it manages teams and their keys (`/admin/*`) and nothing else. From
 * TIDEPOOL_ADMIN_KEY when set; otherwise made at the first start, logged once, and kept only as a hash.
 */
export class AdminKey {
  private constructor(private readonly hash: Buffer) {}

  /** `generated`: the key made by this start (the one time it is visible). */
  static async open(sql: Sql, configured: string, logger: Logger): Promise<{ admin: AdminKey; generated?: string }> {
    if (configured !== '') return { admin: new AdminKey(sha256(configured)) };
    const stored = await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [ADMIN_KEY_SETTING]);
    if (stored) return { admin: new AdminKey(Buffer.from(stored.value, 'hex')) };
    const key = `tpadmin_${randomBytes(24).toString('hex')}`;
    await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [ADMIN_KEY_SETTING, sha256(key).toString('hex')]);
    const kept = await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [ADMIN_KEY_SETTING]);
    if (!kept) throw new Error('store: the admin key hash vanished right after it was written');
    // Another replica won the race to the first start: its key is the admin key, this one was never stored.
    if (kept.value !== sha256(key).toString('hex')) return { admin: new AdminKey(Buffer.from(kept.value, 'hex')) };
    logger.warn(
      { adminKey: key },
      `=== FIRST START: generated admin key ${key} — it manages teams and API keys (/admin, the dashboard's Admin page); stored only as a hash, it will not be shown again (set TIDEPOOL_ADMIN_KEY to choose one) ===`,
    );
    return { admin: new AdminKey(sha256(key)), generated: key };
  }

  matches(presented: string | undefined): boolean {
    if (typeof presented !== 'string' || presented === '') return false;
    return timingSafeEqual(sha256(presented), this.hash);
  }
}
