import { existsSync, readFileSync, rmSync } from 'node:fs';

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
 * The platform writes an empty `<token file>.written` right after the token, in the same archive: the engine
 * finishes one entry (owner, mode, times) before it starts the next, so once the marker is there the token is
 * whole and the engine is done with it. A token deleted earlier — at its newline — made the engine's chown of
 * it fail, and with it the whole write and the sandbox's create.
 */
export const tokenWrittenMarker = (path: string): string => `${path}.written`;

/** A token file without the marker (another writer) is taken once it has not changed for this long. */
const SETTLED_MS = 1_000;

/** The marker is removed this long after it appears: by then the engine has long finished it too. */
const MARKER_KEPT_MS = 10_000;

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the access token file ${path}: ${(error as Error).message}`);
  }
}

function removeLater(path: string, ms: number): void {
  setTimeout(() => rmSync(path, { force: true }), ms).unref();
}

/**
 * Like takeBirthToken, but a platform may also write the file while envd is already starting (it
 * starts the container and writes the token at the same time): waits up to `timeoutMs` for it,
 * polling every few ms. The token is taken once its marker (tokenWrittenMarker) exists, or — written by
 * something else, without one — once it is non-empty and unchanged for SETTLED_MS; at the deadline, as it is.
 * Nothing listens before this returns, so no request can arrive without the token in place.
 */
export async function awaitBirthToken(path: string, timeoutMs: number, markerKeptMs = MARKER_KEPT_MS): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  const marker = tokenWrittenMarker(path);
  let previous: string | undefined;
  let changedAt = Date.now();
  for (;;) {
    const marked = existsSync(marker);
    const text = readIfPresent(path);
    const now = Date.now();
    if (text !== previous) changedAt = now;
    if (marked && text !== undefined) {
      removeLater(marker, markerKeptMs);
      return takeBirthToken(path);
    }
    const settled = text !== undefined && text !== '' && now - changedAt >= SETTLED_MS;
    if (settled || (text !== undefined && now >= deadline)) return takeBirthToken(path);
    if (now >= deadline) return undefined;
    previous = text;
    await sleep(text === undefined ? 5 : 2);
  }
}
