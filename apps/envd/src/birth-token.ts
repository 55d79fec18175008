import { readFileSync, rmSync, statSync } from 'node:fs';

/** Where the platform puts the access token as the container starts (root-only, read once). */
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

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The modification time the platform gives the token file in its archive (2000-01-01T00:00:00Z; apps/api
 * envd-birth-token.ts ENVD_TOKEN_MTIME): the engine writes a file, then sets its owner, mode and — last — its times,
 * so a file showing this mtime is one the engine is done with. Deleted earlier — at its newline — the engine's chown
 * of it failed, and with it the whole write and the sandbox's create.
 */
export const PLATFORM_TOKEN_MTIME_MS = Date.UTC(2000, 0, 1);

/** A token file written otherwise (without that mtime) is taken once it has not changed for this long. */
const SETTLED_MS = 1_000;

/** The file's text and whether the engine is done writing it, or undefined when there is none. */
function readIfPresent(path: string): { text: string; done: boolean } | undefined {
  try {
    const done = statSync(path).mtimeMs === PLATFORM_TOKEN_MTIME_MS;
    return { text: readFileSync(path, 'utf8'), done };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the access token file ${path}: ${(error as Error).message}`);
  }
}

/**
 * Like takeBirthToken, but a platform may also write the file while envd is already starting (it
 * starts the container and writes the token at the same time): waits up to `timeoutMs` for it,
 * polling every few ms. The token is taken once the file carries the platform's mtime (PLATFORM_TOKEN_MTIME_MS:
 * the engine is done with it), or — written some other way — once it is non-empty and unchanged for SETTLED_MS;
 * at the deadline, as it is. Nothing listens before this returns, so no request can arrive without the token in place.
 */
export async function awaitBirthToken(path: string, timeoutMs: number): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  let previous: string | undefined;
  let changedAt = Date.now();
  for (;;) {
    const file = readIfPresent(path);
    const now = Date.now();
    if (file?.text !== previous) changedAt = now;
    const settled = file !== undefined && file.text !== '' && now - changedAt >= SETTLED_MS;
    if (file?.done || settled || (file !== undefined && now >= deadline)) return takeBirthToken(path);
    if (now >= deadline) return undefined;
    previous = file?.text;
    await sleep(file === undefined ? 5 : 2);
  }
}
