/**
 * The token seed: every sandbox's envd access token and traffic token are derived from it, so whoever holds it holds
 * every sandbox. It lives where only API replicas can read it, never in the database (which node agents and backups
 * may reach):
 *   - TIDEPOOL_TOKEN_SEED_FILE, when set and not empty;
 *   - else `<data dir>/token-seed` when present (a seed moved out of an older database);
 *   - else derived from the secrets key (HKDF-SHA256), so replicas sharing TIDEPOOL_SECRETS_KEY share it, and kept
 *     in `<data dir>/token-seed` from then on (a later change of the secrets key keeps the tokens).
 * An older database holding the seed (`settings.token_seed`) has it moved out once — written (0600, synced) into
 * TIDEPOOL_TOKEN_SEED_FILE or `<data dir>/token-seed`, then deleted from the database — so running sandboxes keep
 * their tokens. The database keeps only a check value (an HMAC under the seed, which tells nothing of it): a replica
 * whose seed is another one refuses to start instead of handing out tokens the others reject.
 */
import { createHmac, hkdfSync } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Sql } from '../store/sql.ts';

/** A token seed this replica cannot use (unreadable, malformed, or not the one the database's sandboxes were given): stops the start. */
export class TokenSeedError extends Error {
  constructor(message: string) {
    super(`invalid configuration:\n  ${message}`);
    this.name = 'TokenSeedError';
  }
}

const LEGACY_KEY = 'token_seed';
const CHECK_KEY = 'token_seed_check';
const SEED_FILE = 'token-seed';
const SEED_PATTERN = /^[0-9a-f]{64}$/;

export interface TokenSeedOptions {
  sql: Sql;
  dataDir: string;
  /** TIDEPOOL_TOKEN_SEED_FILE ('' = unset). */
  seedFile: string;
  /** The secrets key (TIDEPOOL_SECRETS_KEY or `<data dir>/secrets.key`). */
  secretsKey: () => Buffer;
  logger: Logger;
}

/** The seed derived from a secrets key. */
export function deriveTokenSeed(secretsKey: Buffer): string {
  return Buffer.from(hkdfSync('sha256', secretsKey, Buffer.alloc(0), 'tidepool token seed v1', 32)).toString('hex');
}

/** What the database keeps to recognise the seed (an HMAC under it: nothing of the seed can be learned from it). */
export function tokenSeedCheck(seed: string): string {
  return createHmac('sha256', Buffer.from(seed, 'hex')).update('tidepool token seed check v1').digest('hex');
}

function readSeed(path: string, setting: string): string | undefined {
  if (!existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8').trim();
  } catch (error) {
    throw new TokenSeedError(`${setting}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  if (text === '') return undefined;
  if (!SEED_PATTERN.test(text)) throw new TokenSeedError(`${setting}: ${path} must hold the token seed, 64 lower-case hex characters (\`openssl rand -hex 32\`)`);
  return text;
}

/** Writes the seed where it stays (0600), synced before the database forgets it. */
function writeSeed(path: string, seed: string): void {
  const fd = openSync(path, 'w', 0o600);
  try {
    writeSync(fd, `${seed}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Resolves this replica's token seed (moving an older database's out first); refuses one the database does not recognise. */
export async function loadTokenSeed(options: TokenSeedOptions): Promise<string> {
  const { sql, logger } = options;
  const setting = options.seedFile ? 'TIDEPOOL_TOKEN_SEED_FILE' : `${join(resolve(options.dataDir), SEED_FILE)} (the data directory's token seed)`;
  const path = options.seedFile ? resolve(options.seedFile) : join(resolve(options.dataDir), SEED_FILE);
  let seed = readSeed(path, setting);
  const legacy = (await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [LEGACY_KEY]))?.value;
  if (legacy !== undefined) {
    if (seed !== undefined && seed !== legacy) {
      throw new TokenSeedError(`${setting}: ${path} holds a token seed other than the one this database's sandboxes were given (still in the database); empty the file or remove it to have that seed moved there`);
    }
    if (seed === undefined) {
      writeSeed(path, legacy);
      logger.warn({ path }, 'moved the token seed out of the database into this file (mode 0600): every API replica needs it (TIDEPOOL_TOKEN_SEED_FILE), back it up with the secrets key');
    }
    seed = legacy;
    await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [CHECK_KEY, tokenSeedCheck(seed)]);
    await sql.run('DELETE FROM settings WHERE key = ?', [LEGACY_KEY]);
    return seed;
  }
  const derived = seed === undefined;
  seed ??= deriveTokenSeed(options.secretsKey());
  const check = tokenSeedCheck(seed);
  await sql.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [CHECK_KEY, check]);
  const recorded = (await sql.get<{ value: string }>('SELECT value FROM settings WHERE key = ?', [CHECK_KEY]))?.value;
  if (recorded !== check) {
    throw new TokenSeedError(
      `TIDEPOOL_TOKEN_SEED_FILE / TIDEPOOL_SECRETS_KEY: this replica's token seed (${options.seedFile ? `from ${path}` : existsSync(path) ? `from ${path}` : 'derived from its secrets key'}) is not the one this database's sandboxes were given. Every API replica needs the same seed: the same TIDEPOOL_SECRETS_KEY, or the token seed file another replica moved out of the database (its log says where) as TIDEPOOL_TOKEN_SEED_FILE`,
    );
  }
  // A seed derived from the secrets key is kept in the data directory once the database has recognised it: a later
  // change of the secrets key (another key, a rotation) then leaves the sandboxes' tokens as they are.
  if (derived && !options.seedFile) writeSeed(path, seed);
  return seed;
}
