import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export type Db = Database.Database;

/** Numbered schema migrations; applied in order, each exactly once. */
const MIGRATIONS: string[] = [
  `CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE api_keys (hash TEXT PRIMARY KEY, prefix TEXT NOT NULL, created_at TEXT NOT NULL);
   CREATE TABLE templates (
     template_id TEXT PRIMARY KEY, alias TEXT UNIQUE, image TEXT NOT NULL,
     cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL, disk_size_mb INTEGER NOT NULL,
     envd_version TEXT NOT NULL, build_id TEXT NOT NULL, public INTEGER NOT NULL DEFAULT 0,
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL, spawn_count INTEGER NOT NULL DEFAULT 0,
     last_spawned_at TEXT, build_count INTEGER NOT NULL DEFAULT 1);
   CREATE TABLE sandboxes (
     sandbox_id TEXT PRIMARY KEY, template_id TEXT NOT NULL, alias TEXT,
     state TEXT NOT NULL, container_id TEXT, address TEXT, paused_image TEXT,
     started_at TEXT NOT NULL, end_at TEXT NOT NULL, timeout_seconds INTEGER NOT NULL, paused_at TEXT,
     cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL, disk_size_mb INTEGER NOT NULL,
     envd_version TEXT NOT NULL, envd_access_token TEXT NOT NULL, traffic_access_token TEXT,
     metadata TEXT NOT NULL, env_vars TEXT NOT NULL, network TEXT NOT NULL,
     allow_internet_access INTEGER, auto_pause INTEGER NOT NULL, auto_pause_memory INTEGER NOT NULL,
     auto_resume INTEGER NOT NULL);
   CREATE TABLE sandbox_events (
     id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL, timestamp TEXT NOT NULL,
     level TEXT NOT NULL, message TEXT NOT NULL);
   CREATE INDEX sandbox_events_by_sandbox ON sandbox_events (sandbox_id, timestamp);`,
];

/** Opens (creating if needed) the platform database in the data directory and migrates it. */
export function openDatabase(dataDir: string): Db {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, 'tidepool.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[]).map((r) => r.version));
  MIGRATIONS.forEach((sql, index) => {
    const version = index + 1;
    if (applied.has(version)) return;
    db.transaction(() => {
      db.exec(sql);
      db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(version, new Date().toISOString());
    })();
  });
  return db;
}
