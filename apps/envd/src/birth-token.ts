import { readFileSync, rmSync } from 'node:fs';

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

/** A token file without its final newline is taken once it has not changed for this long. */
const SETTLED_MS = 50;

function readIfPresent(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the access token file ${path}: ${(error as Error).message}`);
  }
}

/**
 * Like takeBirthToken, but a platform may also write the file while envd is already starting (it
 * starts the container and writes the token at the same time): waits up to `timeoutMs` for it,
 * polling every few ms. The platform writes `<token>\n`; a file without its newline may still be
 * being written, so it is taken only once complete, or once unchanged for SETTLED_MS (other writers).
 * Nothing listens before this returns, so no request can arrive without the token in place.
 */
export async function awaitBirthToken(path: string, timeoutMs: number): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  let previous: string | undefined;
  let changedAt = Date.now();
  for (;;) {
    const text = readIfPresent(path);
    const now = Date.now();
    if (text !== previous) changedAt = now;
    const settled = text !== undefined && text !== '' && now - changedAt >= SETTLED_MS;
    if (text?.endsWith('\n') || settled || (text !== undefined && now >= deadline)) return takeBirthToken(path);
    if (now >= deadline) return undefined;
    previous = text;
    await sleep(text === undefined ? 5 : 2);
  }
}
