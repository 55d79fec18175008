import { readFileSync, rmSync } from 'node:fs';

/** Where the platform puts the access token before the container starts (root-only, read once). */
export const DEFAULT_ACCESS_TOKEN_FILE = '/run/tidepool/envd-access-token';

/**
 * Reads the token the platform placed in the container at create time and removes the file, so
 * nothing else in the sandbox (and no image committed from it later) can find it on disk. The token
 * never travels through an environment variable: user processes, `/proc/<pid>/environ` and
 * `docker inspect` never show it. Returns undefined when there is no file (or it is empty).
 */
export function takeBirthToken(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the access token file ${path}: ${(error as Error).message}`);
  }
  rmSync(path, { force: true });
  const token = text.trim();
  return token === '' ? undefined : token;
}
