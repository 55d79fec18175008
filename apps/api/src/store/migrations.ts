/**
 * Numbered schema migrations, each written for both dialects; applied in order, each exactly once
 * (schema_migrations records which). PostgreSQL has no implicit rowid: the tables whose insertion order
 * the stores read (`ORDER BY rowid`) get an identity column named `rowid`, so one query serves both.
 */
export interface Migration {
  sqlite: string;
  postgres: string;
}

const SQLITE: string[] = [
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
  // Templates become a resource: builds (one image each), tags pointing at builds, build logs, the
  // images each build uses, uploaded context archives; sandboxes remember their build and its defaults.
  `CREATE TABLE templates_v2 (
     template_id TEXT PRIMARY KEY, alias TEXT UNIQUE, kind TEXT NOT NULL DEFAULT 'template',
     public INTEGER NOT NULL DEFAULT 0, cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL,
     disk_size_mb INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
     spawn_count INTEGER NOT NULL DEFAULT 0, last_spawned_at TEXT, source_sandbox_id TEXT);
   CREATE TABLE template_builds (
     build_id TEXT PRIMARY KEY, template_id TEXT NOT NULL, status TEXT NOT NULL, image TEXT,
     cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL, disk_size_mb INTEGER NOT NULL,
     envd_version TEXT, defaults TEXT NOT NULL, spec TEXT, reason TEXT, requested_tags TEXT NOT NULL DEFAULT '["default"]',
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT);
   CREATE INDEX template_builds_by_template ON template_builds (template_id, created_at);
   CREATE TABLE template_tags (
     template_id TEXT NOT NULL, tag TEXT NOT NULL, build_id TEXT NOT NULL, created_at TEXT NOT NULL,
     PRIMARY KEY (template_id, tag));
   CREATE TABLE build_logs (
     build_id TEXT NOT NULL, seq INTEGER NOT NULL, timestamp TEXT NOT NULL, level TEXT NOT NULL,
     message TEXT NOT NULL, step TEXT, PRIMARY KEY (build_id, seq));
   CREATE TABLE build_images (build_id TEXT NOT NULL, image TEXT NOT NULL, PRIMARY KEY (build_id, image));
   CREATE TABLE context_files (
     files_hash TEXT NOT NULL, template_id TEXT NOT NULL, size INTEGER NOT NULL, uploaded_at TEXT NOT NULL,
     PRIMARY KEY (files_hash, template_id));
   INSERT INTO templates_v2 (template_id, alias, kind, public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at, spawn_count, last_spawned_at)
     SELECT template_id, alias, 'template', public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at, spawn_count, last_spawned_at FROM templates;
   INSERT INTO template_builds (build_id, template_id, status, image, cpu_count, memory_mb, disk_size_mb, envd_version, defaults, created_at, updated_at, finished_at)
     SELECT build_id, template_id, 'ready', image, cpu_count, memory_mb, disk_size_mb, envd_version,
       '{"user":"user","workdir":"/home/user","envs":{},"startCmd":null,"readyCmd":null}', created_at, updated_at, updated_at FROM templates;
   INSERT INTO template_tags (template_id, tag, build_id, created_at) SELECT template_id, 'default', build_id, created_at FROM templates;
   DROP TABLE templates;
   ALTER TABLE templates_v2 RENAME TO templates;
   ALTER TABLE sandboxes ADD COLUMN build_id TEXT NOT NULL DEFAULT 'base';
   ALTER TABLE sandboxes ADD COLUMN defaults TEXT NOT NULL DEFAULT '{"user":"user","workdir":"/home/user","envs":{},"startCmd":null,"readyCmd":null}';`,
  // Volumes: named directories under <dataDir>/volumes/<volume_id>; sandboxes remember what they mount.
  `CREATE TABLE volumes (volume_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, token TEXT NOT NULL, created_at TEXT NOT NULL);
   ALTER TABLE sandboxes ADD COLUMN volume_mounts TEXT NOT NULL DEFAULT '[]';`,
  // Secrets (secrets/secret-store.ts): metadata in the clear, the value sealed (AES-256-GCM); one key check row.
  `CREATE TABLE secrets (
     secret_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, version INTEGER NOT NULL, sealed BLOB NOT NULL,
     metadata TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
   CREATE TABLE secret_key_check (id INTEGER PRIMARY KEY CHECK (id = 1), sealed BLOB NOT NULL);`,
  // Leases: which replica acts on a sandbox's timeout (row lease), and named leases for singleton duties.
  `ALTER TABLE sandboxes ADD COLUMN lease_owner TEXT;
   ALTER TABLE sandboxes ADD COLUMN lease_until INTEGER;
   CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, until_ms INTEGER NOT NULL);`,
  // Teams (teams/*): every key, sandbox, template (built-ins excepted: team_id NULL, seen by all), volume and secret
  // belongs to one; what existed goes to the default team (its id kept in settings, made here when missing).
  // Volume and secret names become unique per team (the tables are rebuilt: SQLite cannot drop a constraint).
  `INSERT INTO settings (key, value) VALUES ('default_team_id',
     lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' || substr(lower(hex(randomblob(2))), 2) || '-a' || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))))
     ON CONFLICT (key) DO NOTHING;
   CREATE TABLE teams (team_id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
   INSERT INTO teams (team_id, name, created_at) SELECT value, 'default', strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM settings WHERE key = 'default_team_id';
   ALTER TABLE api_keys ADD COLUMN key_id TEXT;
   ALTER TABLE api_keys ADD COLUMN team_id TEXT;
   ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'key';
   ALTER TABLE api_keys ADD COLUMN suffix TEXT NOT NULL DEFAULT '';
   UPDATE api_keys SET key_id = 'key_' || substr(hash, 1, 24), team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   CREATE UNIQUE INDEX api_keys_by_id ON api_keys (key_id);
   CREATE INDEX api_keys_by_team ON api_keys (team_id);
   ALTER TABLE sandboxes ADD COLUMN team_id TEXT;
   UPDATE sandboxes SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   ALTER TABLE templates ADD COLUMN team_id TEXT;
   UPDATE templates SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id') WHERE template_id NOT IN ('base', 'code-interpreter');
   CREATE TABLE volumes_v6 (volume_id TEXT PRIMARY KEY, team_id TEXT NOT NULL, name TEXT NOT NULL, token TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE (team_id, name));
   INSERT INTO volumes_v6 (volume_id, team_id, name, token, created_at) SELECT volume_id, (SELECT value FROM settings WHERE key = 'default_team_id'), name, token, created_at FROM volumes;
   DROP TABLE volumes;
   ALTER TABLE volumes_v6 RENAME TO volumes;
   CREATE TABLE secrets_v6 (
     secret_id TEXT PRIMARY KEY, team_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, sealed BLOB NOT NULL,
     metadata TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (team_id, name));
   INSERT INTO secrets_v6 (secret_id, team_id, name, version, sealed, metadata, created_at, updated_at)
     SELECT secret_id, (SELECT value FROM settings WHERE key = 'default_team_id'), name, version, sealed, metadata, created_at, updated_at FROM secrets;
   DROP TABLE secrets;
   ALTER TABLE secrets_v6 RENAME TO secrets;`,
  `CREATE TABLE nodes (
     node_id TEXT PRIMARY KEY, url TEXT NOT NULL, version TEXT NOT NULL, capacity TEXT NOT NULL,
     status TEXT NOT NULL, last_heartbeat INTEGER NOT NULL, registered_at TEXT NOT NULL);
   ALTER TABLE sandboxes ADD COLUMN node_id TEXT;`,
  // 8: API replicas: slots held by creates and resumes in flight (any replica's), renewed by their replica while it lives.
  `CREATE TABLE sandbox_reservations (
     sandbox_id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, counted INTEGER NOT NULL, until_ms INTEGER NOT NULL);`,
  // 9: a volume lives on one node's disk (NULL: the embedded node of the API that made it, before nodes existed).
  `ALTER TABLE volumes ADD COLUMN node_id TEXT;`,
  // 10: a reservation names the team its sandbox is made for (TIDEPOOL_TEAM_MAX_SANDBOXES counts them across replicas).
  `ALTER TABLE sandbox_reservations ADD COLUMN team_id TEXT;`,
];

const POSTGRES: string[] = [
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
     id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, sandbox_id TEXT NOT NULL, timestamp TEXT NOT NULL,
     level TEXT NOT NULL, message TEXT NOT NULL);
   CREATE INDEX sandbox_events_by_sandbox ON sandbox_events (sandbox_id, timestamp);`,
  `CREATE TABLE templates_v2 (
     template_id TEXT PRIMARY KEY, alias TEXT UNIQUE, kind TEXT NOT NULL DEFAULT 'template',
     public INTEGER NOT NULL DEFAULT 0, cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL,
     disk_size_mb INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
     spawn_count INTEGER NOT NULL DEFAULT 0, last_spawned_at TEXT, source_sandbox_id TEXT);
   CREATE TABLE template_builds (
     build_id TEXT PRIMARY KEY, template_id TEXT NOT NULL, status TEXT NOT NULL, image TEXT,
     cpu_count INTEGER NOT NULL, memory_mb INTEGER NOT NULL, disk_size_mb INTEGER NOT NULL,
     envd_version TEXT, defaults TEXT NOT NULL, spec TEXT, reason TEXT, requested_tags TEXT NOT NULL DEFAULT '["default"]',
     created_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT,
     rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE);
   CREATE INDEX template_builds_by_template ON template_builds (template_id, created_at);
   CREATE TABLE template_tags (
     template_id TEXT NOT NULL, tag TEXT NOT NULL, build_id TEXT NOT NULL, created_at TEXT NOT NULL,
     PRIMARY KEY (template_id, tag));
   CREATE TABLE build_logs (
     build_id TEXT NOT NULL, seq INTEGER NOT NULL, timestamp TEXT NOT NULL, level TEXT NOT NULL,
     message TEXT NOT NULL, step TEXT, PRIMARY KEY (build_id, seq));
   CREATE TABLE build_images (build_id TEXT NOT NULL, image TEXT NOT NULL, rowid BIGINT GENERATED BY DEFAULT AS IDENTITY UNIQUE, PRIMARY KEY (build_id, image));
   CREATE TABLE context_files (
     files_hash TEXT NOT NULL, template_id TEXT NOT NULL, size BIGINT NOT NULL, uploaded_at TEXT NOT NULL,
     PRIMARY KEY (files_hash, template_id));
   INSERT INTO templates_v2 (template_id, alias, kind, public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at, spawn_count, last_spawned_at)
     SELECT template_id, alias, 'template', public, cpu_count, memory_mb, disk_size_mb, created_at, updated_at, spawn_count, last_spawned_at FROM templates;
   INSERT INTO template_builds (build_id, template_id, status, image, cpu_count, memory_mb, disk_size_mb, envd_version, defaults, created_at, updated_at, finished_at)
     SELECT build_id, template_id, 'ready', image, cpu_count, memory_mb, disk_size_mb, envd_version,
       '{"user":"user","workdir":"/home/user","envs":{},"startCmd":null,"readyCmd":null}', created_at, updated_at, updated_at FROM templates;
   INSERT INTO template_tags (template_id, tag, build_id, created_at) SELECT template_id, 'default', build_id, created_at FROM templates;
   DROP TABLE templates;
   ALTER TABLE templates_v2 RENAME TO templates;
   ALTER TABLE sandboxes ADD COLUMN build_id TEXT NOT NULL DEFAULT 'base';
   ALTER TABLE sandboxes ADD COLUMN defaults TEXT NOT NULL DEFAULT '{"user":"user","workdir":"/home/user","envs":{},"startCmd":null,"readyCmd":null}';`,
  `CREATE TABLE volumes (volume_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, token TEXT NOT NULL, created_at TEXT NOT NULL);
   ALTER TABLE sandboxes ADD COLUMN volume_mounts TEXT NOT NULL DEFAULT '[]';`,
  `CREATE TABLE secrets (
     secret_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, version INTEGER NOT NULL, sealed BYTEA NOT NULL,
     metadata TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
   CREATE TABLE secret_key_check (id INTEGER PRIMARY KEY CHECK (id = 1), sealed BYTEA NOT NULL);`,
  `ALTER TABLE sandboxes ADD COLUMN lease_owner TEXT;
   ALTER TABLE sandboxes ADD COLUMN lease_until BIGINT;
   CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, until_ms BIGINT NOT NULL);`,
  `INSERT INTO settings (key, value) VALUES ('default_team_id', gen_random_uuid()::text) ON CONFLICT (key) DO NOTHING;
   CREATE TABLE teams (team_id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at TEXT NOT NULL);
   INSERT INTO teams (team_id, name, created_at) SELECT value, 'default', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM settings WHERE key = 'default_team_id';
   ALTER TABLE api_keys ADD COLUMN key_id TEXT;
   ALTER TABLE api_keys ADD COLUMN team_id TEXT;
   ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'key';
   ALTER TABLE api_keys ADD COLUMN suffix TEXT NOT NULL DEFAULT '';
   UPDATE api_keys SET key_id = 'key_' || substr(hash, 1, 24), team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   CREATE UNIQUE INDEX api_keys_by_id ON api_keys (key_id);
   CREATE INDEX api_keys_by_team ON api_keys (team_id);
   ALTER TABLE sandboxes ADD COLUMN team_id TEXT;
   UPDATE sandboxes SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   ALTER TABLE templates ADD COLUMN team_id TEXT;
   UPDATE templates SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id') WHERE template_id NOT IN ('base', 'code-interpreter');
   ALTER TABLE volumes ADD COLUMN team_id TEXT;
   UPDATE volumes SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   ALTER TABLE volumes ALTER COLUMN team_id SET NOT NULL;
   ALTER TABLE volumes DROP CONSTRAINT volumes_name_key;
   ALTER TABLE volumes ADD CONSTRAINT volumes_team_name_key UNIQUE (team_id, name);
   ALTER TABLE secrets ADD COLUMN team_id TEXT;
   UPDATE secrets SET team_id = (SELECT value FROM settings WHERE key = 'default_team_id');
   ALTER TABLE secrets ALTER COLUMN team_id SET NOT NULL;
   ALTER TABLE secrets DROP CONSTRAINT secrets_name_key;
   ALTER TABLE secrets ADD CONSTRAINT secrets_team_name_key UNIQUE (team_id, name);`,
  `CREATE TABLE nodes (
     node_id TEXT PRIMARY KEY, url TEXT NOT NULL, version TEXT NOT NULL, capacity TEXT NOT NULL,
     status TEXT NOT NULL, last_heartbeat BIGINT NOT NULL, registered_at TEXT NOT NULL);
   ALTER TABLE sandboxes ADD COLUMN node_id TEXT;`,
  // Every change to a sandbox row is announced to the replicas (LISTEN tidepool_sandbox; payload: the sandbox id),
  // delivered when its transaction commits, in commit order. Lease columns alone are no change anyone caches.
  `CREATE TABLE sandbox_reservations (
     sandbox_id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, counted INTEGER NOT NULL, until_ms BIGINT NOT NULL);
   CREATE FUNCTION tidepool_sandbox_changed() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM pg_notify('tidepool_sandbox', COALESCE(NEW.sandbox_id, OLD.sandbox_id));
     RETURN NULL;
   END $$;
   CREATE TRIGGER sandboxes_changed AFTER INSERT OR DELETE ON sandboxes
     FOR EACH ROW EXECUTE FUNCTION tidepool_sandbox_changed();
   CREATE TRIGGER sandboxes_updated AFTER UPDATE ON sandboxes
     FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.* AND (OLD.lease_owner IS NOT DISTINCT FROM NEW.lease_owner AND OLD.lease_until IS NOT DISTINCT FROM NEW.lease_until))
     EXECUTE FUNCTION tidepool_sandbox_changed();`,
  `ALTER TABLE volumes ADD COLUMN node_id TEXT;`,
  `ALTER TABLE sandbox_reservations ADD COLUMN team_id TEXT;`,
];

if (SQLITE.length !== POSTGRES.length) throw new Error('store: every migration needs a SQLite and a PostgreSQL text');

export const MIGRATIONS: Migration[] = SQLITE.map((sqlite, index) => ({ sqlite, postgres: POSTGRES[index]! }));
