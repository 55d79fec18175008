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
  /** How API replicas sharing this database coordinate (PostgreSQL); undefined for SQLite, which serves one process. */
  readonly replicas?: ReplicaChannel;
  close(): Promise<void>;
}

/** A subscription to a notification channel; closing it stops reconnecting. */
export interface ChannelSubscription {
  close(): Promise<void>;
}

/**
 * What API replicas on one database coordinate through: locks held across processes (released by the database when
 * the holder's connection dies, so a SIGKILLed replica holds nothing), and notifications delivered at commit.
 */
export interface ReplicaChannel {
  /** Runs `work` while holding the lock named `key` (waits for any other holder, in this process or another). */
  withLock<T>(key: string, work: () => Promise<T>): Promise<T>;
  /**
   * Delivers every notification on `channel`; `connected` runs after each (re)connection, once listening: what was
   * notified while disconnected is lost, so the caller catches up there.
   */
  listen(channel: string, handlers: { message(payload: string): void; connected(): void }): Promise<ChannelSubscription>;
  /** Sends `payload` on `channel` (delivered after everything committed before it). */
  notify(channel: string, payload: string): Promise<void>;
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
