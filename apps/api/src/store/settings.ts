import type { Sql } from './sql.ts';

/**
 * A platform setting: the stored value, or `create()`'s value stored now (first use) and kept from then on.
 * When replicas race on the first use, every one gets the first value written.
 */
export async function settingOrCreate(sql: Sql, key: string, create: () => string): Promise<string> {
  const row = await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [key]);
  if (row) return row.value;
  await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [key, create()]);
  const stored = await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [key]);
  if (!stored) throw new Error(`store: setting ${key} vanished right after it was written`);
  return stored.value;
}
