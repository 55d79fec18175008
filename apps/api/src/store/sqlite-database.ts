import { AsyncLocalStorage } from 'node:async_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS } from './migrations.ts';
import { type Database, DatabaseError, type Sql, type SqlValue } from './sql.ts';

type Connection = BetterSqlite3.Database;

/** Runs statements on the connection directly (cached prepared statements). */
class Statements {
  private readonly cache = new Map<string, BetterSqlite3.Statement>();
  constructor(readonly connection: Connection) {}

  prepare(sql: string): BetterSqlite3.Statement {
    let statement = this.cache.get(sql);
    if (!statement) {
      statement = this.connection.prepare(sql);
      if (this.cache.size >= 500) this.cache.clear();
      this.cache.set(sql, statement);
    }
    return statement;
  }
}

/** The connection as seen inside one transaction: no waiting (the transaction holds it); unusable once it ended. */
class SqliteTransaction implements Sql {
  readonly dialect = 'sqlite';
  ended = false;
  constructor(private readonly statements: Statements) {}

  private use(): Statements {
    if (this.ended) throw new Error('store: a transaction was used after it ended');
    return this.statements;
  }

  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    return this.use().prepare(sql).all(...params) as T[];
  }

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return this.use().prepare(sql).get(...params) as T | undefined;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.use().prepare(sql).run(...params).changes;
  }

  transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    return work(this);
  }
}

/**
 * SQLite in the data directory (better-sqlite3: synchronous underneath). One connection, so a
 * transaction whose work awaits holds it: statements from elsewhere wait until it commits or rolls
 * back (they would otherwise land inside it). Outside transactions a statement runs at once, in call order.
 */
export class SqliteDatabase implements Database {
  readonly dialect = 'sqlite';
  readonly description: string;
  private readonly statements: Statements;
  /** Settles when the open transaction ends; undefined when none is open. */
  private gate: Promise<void> | undefined;
  private open: SqliteTransaction | undefined;
  /**
   * Which transaction's work is running: a statement it sends past its own Sql would wait for itself forever.
   * Enabled only while a transaction is open (disabled again when it ends): an enabled AsyncLocalStorage makes
   * Node run a hook for every promise of the whole process (~4% of the API's CPU in a burst profile here).
   */
  private readonly context = new AsyncLocalStorage<SqliteTransaction>();

  private constructor(private readonly connection: Connection, file: string) {
    this.statements = new Statements(connection);
    this.description = `sqlite:${file}`;
  }

  /** Opens (creating if needed) `<dataDir>/tidepool.db` and migrates it. */
  static open(dataDir: string): SqliteDatabase {
    const file = join(dataDir, 'tidepool.db');
    let connection: Connection;
    try {
      mkdirSync(dataDir, { recursive: true });
      connection = new BetterSqlite3(file);
      connection.pragma('journal_mode = WAL');
      connection.pragma('synchronous = NORMAL');
    } catch (error) {
      throw new DatabaseError(`cannot open the SQLite database ${file}: ${(error as Error).message} (check TIDEPOOL_DATA_DIR and its permissions)`, { cause: error });
    }
    connection.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
    const applied = new Set((connection.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version));
    for (const { version, sqlite } of MIGRATIONS) {
      if (applied.has(version)) continue;
      connection.transaction(() => {
        connection.exec(sqlite);
        connection.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(version, new Date().toISOString());
      })();
    }
    return new SqliteDatabase(connection, file);
  }

  private async idle(): Promise<void> {
    if (this.open && this.context.getStore() === this.open) {
      throw new Error('store: a statement was sent past the open transaction from inside it (use the Sql the transaction gave)');
    }
    while (this.gate) await this.gate;
  }

  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    // Re-checked after each wait: several callers woken by one commit must not all go ahead (one may begin a transaction).
    while (this.gate) await this.idle();
    return this.statements.prepare(sql).all(...params) as T[];
  }

  async get<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    while (this.gate) await this.idle();
    return this.statements.prepare(sql).get(...params) as T | undefined;
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    while (this.gate) await this.idle();
    return this.statements.prepare(sql).run(...params).changes;
  }

  async transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    while (this.gate) await this.idle();
    let open!: () => void;
    this.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const transaction = new SqliteTransaction(this.statements);
    this.open = transaction;
    try {
      this.connection.exec('BEGIN IMMEDIATE');
      const result = await this.context.run(transaction, () => work(transaction));
      this.connection.exec('COMMIT');
      return result;
    } catch (error) {
      if (this.connection.inTransaction) this.connection.exec('ROLLBACK');
      throw error;
    } finally {
      transaction.ended = true;
      this.open = undefined;
      this.gate = undefined;
      // Work that outlives its transaction (not awaited by it) no longer needs to be told apart: nothing is open.
      this.context.disable();
      open();
    }
  }

  async close(): Promise<void> {
    while (this.gate) await this.idle();
    if (this.connection.open) this.connection.close();
  }
}
