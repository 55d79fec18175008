import pg from 'pg';
import type { Logger } from 'pino';
import { MIGRATIONS } from './migrations.ts';
import { PgReplicaChannel } from './pg-replica-channel.ts';
import { type Database, DatabaseError, type Sql, type SqlValue } from './sql.ts';

/** Lock id every replica takes while migrating, so two starting at once do not both apply a migration. */
const MIGRATION_LOCK = 0x7469_6465; // 'tide'
const INT8_OID = 20;

/** `?` placeholders → `$1, $2, …` (outside quoted literals and identifiers). */
export function numberedPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  let quote: string | undefined;
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = undefined;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '?') {
      out += `$${++n}`;
    } else {
      out += ch;
    }
  }
  return out;
}

const translations = new Map<string, string>();
function translate(sql: string): string {
  let text = translations.get(sql);
  if (text === undefined) {
    text = numberedPlaceholders(sql);
    if (translations.size >= 1000) translations.clear();
    translations.set(sql, text);
  }
  return text;
}

/** The URL with its password masked, for logs and messages. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

type Queryable = Pick<pg.PoolClient, 'query'>;

async function rows<T>(on: Queryable, sql: string, params: readonly SqlValue[]): Promise<pg.QueryResult> {
  return on.query<T & pg.QueryResultRow>(translate(sql), params as SqlValue[]);
}

/** One client checked out for a transaction; unusable once the transaction ended. */
class PostgresTransaction implements Sql {
  readonly dialect = 'postgres';
  ended = false;
  constructor(private readonly client: pg.PoolClient) {}

  private use(): pg.PoolClient {
    if (this.ended) throw new Error('store: a transaction was used after it ended');
    return this.client;
  }

  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return (await rows<T>(this.use(), sql, params)).rows as T[];
  }

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return (await rows<T>(this.use(), sql, params)).rows[0] as T | undefined;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return (await rows(this.use(), sql, params)).rowCount ?? 0;
  }

  transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return work(this);
  }
}

export interface PostgresOptions {
  url: string;
  logger: Logger;
  /** Connections in the pool (default 10). */
  maxConnections?: number;
  /** How the connections show in pg_stat_activity (default `tidepool-api`). */
  applicationName?: string;
}

/**
 * PostgreSQL shared by every replica (pg's pool). BIGINT columns come back as numbers (they hold
 * sizes and ids far below 2^53); statements are bounded (30 s) so a stuck lock surfaces as an error.
 */
export class PostgresDatabase implements Database {
  readonly dialect = 'postgres';
  readonly description: string;
  /** Locks and notifications between the API replicas on this database. */
  readonly replicas: PgReplicaChannel;

  private constructor(private readonly pool: pg.Pool, url: string, logger: Logger, applicationName: string | undefined) {
    this.description = redactedUrl(url);
    this.replicas = new PgReplicaChannel({ url, logger, applicationName, query: (sql, params) => pool.query(sql, params) });
  }

  /** Connects, checks the server answers and applies the migrations it lacks (under an advisory lock). */
  static async open(options: PostgresOptions): Promise<PostgresDatabase> {
    const where = redactedUrl(options.url);
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: 10_000,
      statement_timeout: 30_000,
      idle_in_transaction_session_timeout: 60_000,
      application_name: options.applicationName ?? 'tidepool-api',
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // An idle pooled connection that breaks (server restart) must not crash the process; the next query reconnects.
    pool.on('error', (error) => options.logger.warn({ err: error, database: where }, 'idle PostgreSQL connection failed; it is replaced on next use'));
    const database = new PostgresDatabase(pool, options.url, options.logger, options.applicationName);
    try {
      await database.migrate();
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw new DatabaseError(`cannot use the PostgreSQL database ${where} (TIDEPOOL_DATABASE_URL): ${(error as Error).message}`, { cause: error });
    }
    return database;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (sql) => {
      await sql.run(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`);
      await sql.run('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
      const applied = new Set((await sql.all<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version));
      for (const { version, postgres } of MIGRATIONS) {
        if (applied.has(version)) continue;
        await sql.run(postgres);
        await sql.run('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)', [version, new Date().toISOString()]);
      }
    });
  }

  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return (await rows<T>(this.pool, sql, params)).rows as T[];
  }

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return (await rows<T>(this.pool, sql, params)).rows[0] as T | undefined;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return (await rows(this.pool, sql, params)).rowCount ?? 0;
  }

  async transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    const transaction = new PostgresTransaction(client);
    let broken: Error | undefined;
    // A checked-out connection has no listener of the pool's: one that breaks mid-transaction (server restart,
    // terminated) would throw from its socket and end the process. Its query rejects too; the connection is dropped.
    const lost = (error: Error): void => {
      broken = error;
    };
    client.on('error', lost);
    try {
      await client.query('BEGIN');
      const result = await work(transaction);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => {
        broken = rollbackError; // the connection is unusable: destroy it rather than pool it
      });
      throw error;
    } finally {
      transaction.ended = true;
      client.off('error', lost);
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.replicas.close();
    await this.pool.end();
  }
}
