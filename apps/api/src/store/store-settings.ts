/** Where the platform keeps its state: the data directory and the database (SQLite in it, or PostgreSQL). */
import { readFileSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import { ConfigError } from '../settings/config-error.ts';
import { text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const storeSettings = settingsGroup('Data and database', {
  dataDir: setting(Type.String({ minLength: 1 }), {
    env: 'TIDEPOOL_DATA_DIR',
    read: (env) => env.TIDEPOOL_DATA_DIR || '.data',
    default: '`.data`',
    description: 'SQLite database (unless `TIDEPOOL_DATABASE_URL`), volumes, uploaded template files, lock, `secrets.key`, per-sandbox egress CAs (`sandbox-ca/`)',
  }),
  databaseUrl: setting(Type.String(), {
    env: 'TIDEPOOL_DATABASE_URL',
    read: (env) => text(env.TIDEPOOL_DATABASE_URL),
    default: 'unset (SQLite)',
    description:
      '**Database**: unset = SQLite `tidepool.db` in the data dir, as always; `postgres://user:password@host:5432/db` (or `postgresql://`, libpq query options such as `?sslmode=require` accepted) = PostgreSQL, the shared state for cluster mode. Checked at startup (scheme, host, database name; the password is never echoed); the schema is migrated on start under an advisory lock, so replicas starting together apply each migration once. An unreachable server stops the start with a message naming the URL (password masked)',
  }),
  databasePasswordFile: setting(Type.String(), {
    env: 'TIDEPOOL_DATABASE_PASSWORD_FILE',
    read: (env) => text(env.TIDEPOOL_DATABASE_PASSWORD_FILE),
    default: 'unset',
    description:
      'A file whose first line is the PostgreSQL password (a Swarm secret under `/run/secrets/`, a mounted Kubernetes Secret): put into `TIDEPOOL_DATABASE_URL`, which then names the user but no password. Refused at startup when the file is unreadable or empty, when the URL already has a password, or when no URL is set',
  }),
});

export type StoreSettings = SettingsOf<typeof storeSettings>;

/** What is wrong with a TIDEPOOL_DATABASE_URL ('' is fine: SQLite), or undefined. Never echoes a password. */
export function databaseUrlProblem(url: string): string | undefined {
  if (url === '') return undefined;
  const example = 'postgres://user:password@host:5432/database';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `not a URL; expected ${example} (unset it to use SQLite in TIDEPOOL_DATA_DIR)`;
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    return `only PostgreSQL is supported (postgres:// or postgresql://), got '${parsed.protocol}//'; expected ${example}, or unset it to use SQLite in TIDEPOOL_DATA_DIR`;
  }
  if (!parsed.hostname) return `names no host; expected ${example}`;
  if (parsed.pathname.length <= 1) return `names no database (the path after the host); expected ${example}`;
  if (parsed.pathname.slice(1).includes('/')) return `the database name may not contain '/'; expected ${example}`;
  return undefined;
}

/** `url` with the password read from `file` (its first line); refused when the URL has none to fill or already has one. */
export function withPasswordFromFile(url: string, file: string): string {
  const name = 'TIDEPOOL_DATABASE_PASSWORD_FILE';
  if (url === '') throw new ConfigError(`invalid configuration:\n  ${name} is set but TIDEPOOL_DATABASE_URL is not: the password is for the PostgreSQL URL`);
  const parsed = new URL(url);
  if (parsed.password !== '') throw new ConfigError(`invalid configuration:\n  TIDEPOOL_DATABASE_URL carries a password and ${name} is set too: keep the password in one place`);
  if (parsed.username === '') throw new ConfigError(`invalid configuration:\n  ${name} is set but TIDEPOOL_DATABASE_URL names no user (postgres://user@host:5432/database)`);
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  ${name}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const password = content.split(/\r?\n/)[0] ?? '';
  if (password === '') throw new ConfigError(`invalid configuration:\n  ${name}: ${file} is empty (its first line is the password)`);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}
