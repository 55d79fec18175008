/**
 * `tidepool migrate`: brings the configured database (TIDEPOOL_DATABASE_URL, else SQLite in TIDEPOOL_DATA_DIR) to
 * the current schema and exits. Opening a database always migrates it (under an advisory lock on PostgreSQL); this
 * does it once, up front, before agents and replicas start (the local cluster's `up`, a deployment's first step).
 */
import { createPlatformLogger } from '../observability/platform-logger.ts';
import { openDatabase } from './database.ts';
import type { StoreSettings } from './store-settings.ts';
import type { ObservabilitySettings } from '../observability/observability-settings.ts';

export async function runMigrate(config: Pick<StoreSettings, 'dataDir' | 'databaseUrl'> & Pick<ObservabilitySettings, 'logLevel'>): Promise<void> {
  const logger = createPlatformLogger(config.logLevel);
  const db = await openDatabase({ dataDir: config.dataDir, databaseUrl: config.databaseUrl, logger });
  logger.info({ database: db.description }, 'database migrated to the current schema');
  await db.close();
}
