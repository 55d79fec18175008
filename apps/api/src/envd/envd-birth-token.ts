import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import tar from 'tar-stream';

/**
 * The access token reaches envd at birth: the platform writes it at this path into the created container
 * (while it starts, under the default runtime; before, under others), and envd waits for it at startup,
 * reads it once and deletes it before it listens (apps/envd/src/birth-token.ts).
 * Root-only (directory 0700, file 0600), never an environment variable: the sandbox user cannot read
 * it, `/proc/<pid>/environ` does not hold it and images committed later do not carry it.
 */
export const ENVD_TOKEN_DIRECTORY = 'run/tidepool';
export const ENVD_TOKEN_FILE = `/${ENVD_TOKEN_DIRECTORY}/envd-access-token`;

/** A tar (extracted at `/`) holding only the token file and its root-only directory. */
export function envdTokenArchive(token: string): Readable {
  const pack = tar.pack();
  const mtime = new Date();
  pack.entry({ name: `${ENVD_TOKEN_DIRECTORY}/`, type: 'directory', mode: 0o700, uid: 0, gid: 0, mtime });
  pack.entry({ name: ENVD_TOKEN_FILE.slice(1), type: 'file', mode: 0o600, uid: 0, gid: 0, mtime }, `${token}\n`);
  pack.finalize();
  return pack;
}

/** A random token of the same shape as the derived ones (64 hex characters). */
export function randomEnvdToken(): string {
  return randomBytes(32).toString('hex');
}
