import type { Sql } from './sql.ts';

/**
 * Named leases for duties exactly one replica may perform at a time (`name` = the duty). A lease is held
 * until `ttlMs` after it was last taken; its holder renews it by taking it again before then, and anyone
 * may take it once it ran out (a replica that died stops renewing).
 */
export class LeaseStore {
  constructor(private readonly sql: Sql) {}

  /** True when `owner` holds `name` now (newly, or renewed); false while another owner's lease runs. */
  async acquire(name: string, owner: string, ttlMs: number, now = Date.now()): Promise<boolean> {
    const changed = await this.sql.run(
      `INSERT INTO leases (name, owner, until_ms) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
       WHERE leases.owner = excluded.owner OR leases.until_ms < ?`,
      [name, owner, now + ttlMs, now],
    );
    return changed === 1;
  }

  /** Ends `owner`'s lease early (no effect when someone else holds it). */
  async release(name: string, owner: string): Promise<void> {
    await this.sql.run('DELETE FROM leases WHERE name = ? AND owner = ?', [name, owner]);
  }

  async holder(name: string, now = Date.now()): Promise<string | undefined> {
    const row = await this.sql.get<{ owner: string }>('SELECT owner FROM leases WHERE name = ? AND until_ms >= ?', [name, now]);
    return row?.owner;
  }
}
