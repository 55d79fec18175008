/**
 * A value bound to a `?` placeholder: both dialects store these as is (booleans are 0/1 integers, objects JSON text,
 * bytes a Buffer: BLOB in SQLite, BYTEA in PostgreSQL, read back as a Buffer from either).
 */
export type SqlValue = string | number | null | Buffer;

/**
 * The query layer every store speaks: SQL with `?` placeholders in the common subset of SQLite and
 * PostgreSQL (`ON CONFLICT … DO UPDATE/NOTHING`, `RETURNING`, no `INSERT OR …`), asynchronous because
 * PostgreSQL is. `transaction` runs `work` all or nothing on one connection; inside it, `work`'s `Sql`
 * must be the only one used (nested `transaction` calls join the outer one).
 */
export interface Sql {
  readonly dialect: 'sqlite' | 'postgres';
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  get<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement; resolves with the number of rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
  transaction<T>(work: (sql: Sql) => Promise<T>): Promise<T>;
}

/** The platform's database: the query layer plus closing it. */
export interface Database extends Sql {
  /** Where the data lives, for logs (`sqlite:<file>` or the PostgreSQL URL without its password). */
  readonly description: string;
  close(): Promise<void>;
}

/** The database cannot be opened, migrated or reached; the message says what to fix. */
export class DatabaseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseError';
  }
}

/** True when `error` is a unique/primary-key violation, in either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}
