import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Shared by every suite on this machine that starts a platform with the desktop template. */
const LOCK_DIR = join(tmpdir(), 'tidepool-desktop-image.lock');

function ownerAlive(): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(LOCK_DIR, 'pid'), 'utf8'));
  } catch {
    return true; // being created: its owner writes the pid right after the directory
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `work` (a platform start with the desktop template and its first desktop create) while holding a lock
 * (a directory, with the holder's pid), so that when the image is out of date only one suite builds it and the
 * next finds it current. A lock whose process is gone is taken over.
 */
export async function withDesktopImageLock<T>(work: () => Promise<T>, timeoutMs = 1_500_000): Promise<T> {
  const release = await holdDesktopLock(timeoutMs);
  try {
    return await work();
  } finally {
    release();
  }
}

/**
 * Takes the same lock until the returned function is called: the browser suites that load sandbox pages hold it for
 * their whole run, so that neither creates sandboxes (new interfaces, which make Chromium drop the other's requests
 * with ERR_NETWORK_CHANGED) while the other's pages load.
 */
export async function holdDesktopLock(timeoutMs = 1_500_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(join(LOCK_DIR, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (!ownerAlive()) {
      rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`the desktop image lock ${LOCK_DIR} was held for over ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return () => rmSync(LOCK_DIR, { recursive: true, force: true });
}
