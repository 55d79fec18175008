import pg from 'pg';
import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { ChannelSubscription, ReplicaChannel } from './sql.ts';

/** Namespace (first key) of the advisory locks of `withLock`; the second key is the name's hash. */
const LOCK_NAMESPACE = 0x7470_6c6b; // 'tplk'
/** Longest wait for a lock another replica holds (a pause that commits a big filesystem can take a while). */
const LOCK_WAIT_MS = 120_000;
const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5_000;

export interface ReplicaChannelOptions {
  url: string;
  logger: Logger;
  /** Connections kept for held locks (each lock held holds one; default 16). */
  maxLockConnections?: number;
  applicationName?: string;
  /** The pool every other statement goes through (notify). */
  query(sql: string, params: unknown[]): Promise<unknown>;
}

/**
 * PostgreSQL's side of replica coordination: session advisory locks on connections of their own (a pool apart from
 * the statements', so a holder's writes never wait for a connection another waiting locker holds), and LISTEN on one
 * dedicated connection per subscription, reconnected with backoff.
 */
export class PgReplicaChannel implements ReplicaChannel {
  private locks: pg.Pool | undefined;

  constructor(private readonly options: ReplicaChannelOptions) {}

  private lockPool(): pg.Pool {
    if (!this.locks) {
      this.locks = new pg.Pool({
        connectionString: this.options.url,
        max: this.options.maxLockConnections ?? 16,
        connectionTimeoutMillis: 10_000,
        lock_timeout: LOCK_WAIT_MS,
        statement_timeout: LOCK_WAIT_MS + 5_000,
        application_name: `${this.options.applicationName ?? 'tidepool-api'}-locks`,
      });
      this.locks.on('error', (error) => this.options.logger.warn({ err: error }, 'idle PostgreSQL lock connection failed; it is replaced on next use'));
    }
    return this.locks;
  }

  async withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
    const client = await this.lockPool().connect();
    let broken: Error | undefined;
    // A held connection that breaks (server restart, terminated) must not crash the process: the lock is gone with it.
    const lost = (error: Error): void => {
      broken = error;
      this.options.logger.warn({ err: error, lock: key }, 'PostgreSQL lock connection lost while held');
    };
    client.on('error', lost);
    try {
      try {
        await client.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCK_NAMESPACE, key]);
      } catch (error) {
        if ((error as { code?: string }).code === '55P03') {
          throw new PlatformError('conflict', `another API replica has been working on "${key}" for over ${LOCK_WAIT_MS / 1000} s; try again later`);
        }
        broken = error as Error;
        throw error;
      }
      try {
        return await work();
      } finally {
        // A failed unlock leaves the lock with the connection: destroying the connection ends it.
        await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [LOCK_NAMESPACE, key]).catch((error: Error) => {
          broken = error;
        });
      }
    } finally {
      client.off('error', lost);
      client.release(broken ?? false);
    }
  }

  async notify(channel: string, payload: string): Promise<void> {
    await this.options.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  async listen(channel: string, handlers: { message(payload: string): void; connected(): void }): Promise<ChannelSubscription> {
    const { url, logger, applicationName } = this.options;
    let closed = false;
    let client: pg.Client | undefined;
    let retry: NodeJS.Timeout | undefined;
    let delay = RECONNECT_MIN_MS;
    const connect = async (): Promise<void> => {
      const next = new pg.Client({ connectionString: url, application_name: `${applicationName ?? 'tidepool-api'}-listen` });
      next.on('notification', (message) => {
        if (message.channel === channel) handlers.message(message.payload ?? '');
      });
      const lost = (error?: Error): void => {
        if (client !== next) return;
        client = undefined;
        next.removeAllListeners('end');
        void next.end().catch(() => undefined);
        if (closed) return;
        logger.warn({ err: error, channel, retryInMs: delay }, 'PostgreSQL notification connection lost; reconnecting');
        schedule();
      };
      next.on('error', lost);
      next.on('end', () => lost());
      client = next;
      try {
        await next.connect();
        await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } catch (error) {
        if (client === next) client = undefined;
        next.removeAllListeners('end');
        await next.end().catch(() => undefined);
        throw error;
      }
      delay = RECONNECT_MIN_MS;
      handlers.connected();
    };
    const schedule = (): void => {
      retry = setTimeout(() => {
        connect().catch((error: unknown) => {
          delay = Math.min(RECONNECT_MAX_MS, delay * 2);
          logger.warn({ err: error, channel, retryInMs: delay }, 'PostgreSQL notification connection failed; retrying');
          if (!closed) schedule();
        });
      }, delay);
      retry.unref();
    };
    await connect();
    return {
      close: async () => {
        closed = true;
        clearTimeout(retry);
        const current = client;
        client = undefined;
        await current?.end().catch(() => undefined);
      },
    };
  }

  async close(): Promise<void> {
    await this.locks?.end();
    this.locks = undefined;
  }
}
