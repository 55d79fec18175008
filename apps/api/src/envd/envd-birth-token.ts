import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import tar from 'tar-stream';

/**
 * The access token reaches envd at birth: the platform writes it into the created container (before it
 * starts, or while it starts when envd waits for it — see envdWaitsForToken), and envd reads it once and
 * deletes it before it listens (apps/envd/src/birth-token.ts).
 * Root-only (directory 0700, file 0600), never an environment variable: the sandbox user cannot read
 * it, `/proc/<pid>/environ` does not hold it and images committed later do not carry it.
 */
export const ENVD_TOKEN_DIRECTORY = 'run/tidepool';
export const ENVD_TOKEN_FILE = `/${ENVD_TOKEN_DIRECTORY}/envd-access-token`;

/**
 * A token file name nobody can know in advance, for containers that start before their token is written:
 * an image (or a snapshot) carrying a file at a known path could otherwise hand envd a planted token before
 * the platform's lands. envd learns the name from ENVD_ACCESS_TOKEN_FILE (not a secret; the token is).
 */
export function unguessableTokenFile(): string {
  return `${ENVD_TOKEN_FILE}-${randomBytes(16).toString('hex')}`;
}

/** envd waits for a token written after the start from this version on (earlier ones read it at once). */
export const ENVD_AWAITS_TOKEN_SINCE = '0.6.14';

/** Whether envd `version` (x.y.z) waits at startup for a token written after the container starts. */
export function envdWaitsForToken(version: string | undefined): boolean {
  const parts = version?.match(/^(\d+)\.(\d+)\.(\d+)/)?.slice(1).map(Number);
  if (!parts) return false;
  const since = ENVD_AWAITS_TOKEN_SINCE.split('.').map(Number);
  for (let i = 0; i < 3; i += 1) if (parts[i] !== since[i]) return parts[i]! > since[i]!;
  return true;
}

/**
 * The token file's modification time in its archive, a fixed past instant (2000-01-01T00:00:00Z) no file written now
 * can have. The engine extracts an entry by creating and writing the file, then setting its owner, mode and — last —
 * its times; envd takes (and deletes) the file only once its mtime is this instant, so only after the engine is done
 * with it. Taken at its newline, envd once deleted the file before the engine's chown, and the engine failed the
 * whole write (`lchown …: no such file or directory`) and with it the create.
 */
export const ENVD_TOKEN_MTIME = new Date(Date.UTC(2000, 0, 1));

/** A tar (extracted at `/`) holding only the token file (at `file`, under /run/tidepool) and its root-only directory. */
export function envdTokenArchive(token: string, file: string = ENVD_TOKEN_FILE): Readable {
  if (!file.startsWith(`/${ENVD_TOKEN_DIRECTORY}/`)) throw new Error(`envd token file ${file} is outside /${ENVD_TOKEN_DIRECTORY}`);
  const pack = tar.pack();
  pack.entry({ name: `${ENVD_TOKEN_DIRECTORY}/`, type: 'directory', mode: 0o700, uid: 0, gid: 0, mtime: new Date() });
  pack.entry({ name: file.slice(1), type: 'file', mode: 0o600, uid: 0, gid: 0, mtime: ENVD_TOKEN_MTIME }, `${token}\n`);
  pack.finalize();
  return pack;
}

/** A random token of the same shape as the derived ones (64 hex characters). */
export function randomEnvdToken(): string {
  return randomBytes(32).toString('hex');
}
