import type { Db } from './database.ts';

/** A platform setting: the stored value, or `create()`'s value stored now (first use) and kept from then on. */
export function settingOrCreate(db: Db, key: string, create: () => string): string {
  const row = db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
  if (row) return row.value;
  const value = create();
  db.prepare('INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)').run(key, value);
  return (db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string }).value;
}
