/**
 * Where `tidepool node` announces itself. With TIDEPOOL_DATABASE_URL (the cluster's PostgreSQL) it registers and
 * heartbeats straight into the API's node table through the same NodeStore the API replicas read: there is no
 * heartbeat endpoint anywhere, so a heartbeat cannot be forged without the database's credentials. Without a
 * database the agent only logs them (a node tried out on its own).
 */
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { NodeStore } from '../nodes/node-store.ts';
import type { NodeHeartbeats } from '../nodes/sandbox-node.ts';
import { PostgresDatabase } from '../store/postgres-database.ts';
import { LoggedHeartbeats } from './logged-heartbeats.ts';

export interface NodeAnnouncements {
  heartbeats: NodeHeartbeats;
  /** Where they go (the database with its password redacted, or `log`). */
  destination: string;
  close(): Promise<void>;
}

/** Opens the node table of the cluster's database (migrated like the API's), or the logging stand-in without one. */
export async function openNodeAnnouncements(config: Pick<Config, 'databaseUrl'>, logger: Logger): Promise<NodeAnnouncements> {
  if (!config.databaseUrl) {
    logger.warn('TIDEPOOL_DATABASE_URL is not set: this node registers nowhere (its registration and heartbeats are only logged); no API can place sandboxes on it');
    return { heartbeats: new LoggedHeartbeats(logger), destination: 'log', close: async () => undefined };
  }
  // Two connections: a heartbeat at a time, plus one while the previous one is still being released.
  const db = await PostgresDatabase.open({ url: config.databaseUrl, logger, maxConnections: 2, applicationName: 'tidepool-node' });
  return { heartbeats: new NodeStore(db), destination: db.description, close: () => db.close() };
}
