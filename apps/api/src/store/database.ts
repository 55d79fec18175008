import type { Logger } from 'pino';
import { PostgresDatabase } from './postgres-database.ts';
import type { Database } from './sql.ts';
import { SqliteDatabase } from './sqlite-database.ts';

export type { Database, Sql, SqlValue } from './sql.ts';

/**
 * The platform database: PostgreSQL when `databaseUrl` is set (shared by replicas), else SQLite in
 * the data directory. Either way migrated to the current schema before it is returned.
 */
export async function openDatabase(options: { dataDir: string; databaseUrl: string; logger: Logger }): Promise<Database> {
  if (options.databaseUrl) return PostgresDatabase.open({ url: options.databaseUrl, logger: options.logger });
  return SqliteDatabase.open(options.dataDir);
}
