import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PostgresServer, startPostgres } from '@tidepool/testkit';
import pino from 'pino';
import { PostgresDatabase } from '../../src/store/postgres-database.ts';
import type { Database } from '../../src/store/sql.ts';
import { SqliteDatabase } from '../../src/store/sqlite-database.ts';

export type BackendKind = 'sqlite' | 'postgres';
export const BACKENDS: BackendKind[] = ['sqlite', 'postgres'];

/**
 * Fresh, migrated databases of one kind: SQLite in a temp data dir each, or a new database each on one
 * throwaway PostgreSQL cluster (started on first use, stopped by `dispose`).
 */
export class StoreBackend {
  private server: Promise<PostgresServer> | undefined;
  private readonly cleanups: Array<() => Promise<void>> = [];
  private count = 0;

  constructor(readonly kind: BackendKind) {}

  /** A URL of a new empty PostgreSQL database (postgres backend only). */
  async freshUrl(): Promise<string> {
    this.server ??= startPostgres();
    const server = await this.server;
    this.count += 1;
    return server.createDatabase(`store_${process.pid}_${this.count}`);
  }

  /** A new empty database, migrated; `replicas` > 1 opens that many handles on the same data (two platform processes). */
  async open(replicas = 1): Promise<Database[]> {
    const logger = pino({ level: 'silent' });
    if (this.kind === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'tidepool-store-'));
      const handles = Array.from({ length: replicas }, () => SqliteDatabase.open(dir));
      this.cleanups.push(async () => {
        for (const handle of handles) await handle.close();
        rmSync(dir, { recursive: true, force: true });
      });
      return handles;
    }
    const url = await this.freshUrl();
    const handles = await Promise.all(Array.from({ length: replicas }, () => PostgresDatabase.open({ url, logger })));
    this.cleanups.push(async () => {
      for (const handle of handles) await handle.close();
    });
    return handles;
  }

  async dispose(): Promise<void> {
    for (const cleanup of this.cleanups.splice(0)) await cleanup().catch(() => undefined);
    if (this.server) await (await this.server).dispose();
  }
}
