import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';

/** Only the platform's user may list or enter the data directory (API key hashes, sandbox tokens). */
const DIR_MODE = 0o700;
/** The database and its WAL/SHM companions. */
const FILE_MODE = 0o600;
const LOCK_FILE = 'tidepool.lock';
const DATABASE_FILES = ['tidepool.db', 'tidepool.db-wal', 'tidepool.db-shm'];

export class DataDirLockedError extends Error {
  constructor(readonly dataDir: string, readonly pid: number) {
    super(`the data directory ${dataDir} is in use by another Tidepool platform (pid ${pid}); stop it or set another TIDEPOOL_DATA_DIR`);
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  /** Removes the lock file (only if it is still ours). */
  release(): void;
}

function setMode(path: string, mode: number, logger: Logger): void {
  const current = statSync(path).mode & 0o777;
  if (current === mode) return;
  chmodSync(path, mode);
  logger.warn({ path, from: current.toString(8), to: mode.toString(8) }, 'tightened permissions of a data file');
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, it is just not ours to signal.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Lock files this process holds: a holder with our own pid that is not in here is a previous incarnation. */
const heldLocks = new Set<string>();

/**
 * Whether the lock's process still runs. Our own pid counts only when this process took the lock: in a
 * container the platform is always pid 1, so after a crash or `docker kill` the lock names the pid the
 * restarted platform has again, and must be taken over rather than refuse the restart forever.
 */
function holderAlive(path: string, holder: number | undefined): holder is number {
  if (holder === undefined) return false;
  if (holder === process.pid) return heldLocks.has(path);
  return processAlive(holder);
}

function lockHolder(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Creates the data directory (0700, tightened when it exists) and takes its lock: a file holding
 * this process's pid, created exclusively. A lock whose process is gone is stale and taken over.
 */
export function lockDataDir(dataDir: string, logger: Logger): DataDirLock {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  setMode(dir, DIR_MODE, logger);
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; ; attempt += 1) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: 'wx', mode: FILE_MODE });
      heldLocks.add(path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) {
        const holder = lockHolder(path);
        if (holderAlive(path, holder)) throw new DataDirLockedError(dir, holder);
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        throw new Error(`cannot take the lock ${path}: another platform is starting on the same data directory`);
      }
      const holder = lockHolder(path);
      if (holderAlive(path, holder)) throw new DataDirLockedError(dir, holder);
      logger.warn({ path, pid: holder }, 'taking over a stale data directory lock (its process is gone)');
      unlinkSync(path);
    }
  }
  return {
    release() {
      heldLocks.delete(path);
      if (lockHolder(path) === process.pid) unlinkSync(path);
    },
  };
}

/** The database files are readable by the platform's user only (existing ones are fixed at start). */
export function secureDatabaseFiles(dataDir: string, logger: Logger): void {
  for (const name of DATABASE_FILES) {
    const path = join(resolve(dataDir), name);
    if (existsSync(path)) setMode(path, FILE_MODE, logger);
  }
}
