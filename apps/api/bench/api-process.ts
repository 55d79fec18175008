/**
 * The platform as its own process (`src/main.ts`, as `npm start` runs it), for measurements that must not
 * count the benchmark's own memory and CPU as the API's: its RSS is read from /proc/<pid>. Throwaway data
 * directory and API key, no warm pool, `TIDEPOOL_ON_SHUTDOWN=kill`. `removeContainers()` removes every
 * container of this platform by its platform-id label, for an interrupted run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { PLATFORM_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { parseKeyValues } from './container-memory.ts';
import { docker, removeContainersWhere } from './docker-baseline.ts';

export interface ApiProcess {
  url: string;
  apiKey: string;
  /** The admin key (`GET /metrics` takes it). */
  adminKey: string;
  platformId: string;
  pid: number;
  /** The API's log (stdout and stderr). */
  logFile: string;
  /** VmRSS of the API process in bytes. */
  rssBytes(): number;
  /** The platform's sandbox and pool containers still on the engine, running or not. */
  containers(): Promise<string[]>;
  /** Removes every container of this platform (interrupted runs). */
  removeContainers(): Promise<number>;
  /** SIGTERM (kills the sandboxes: ON_SHUTDOWN=kill), waits for the exit, removes the data directory. */
  stop(): Promise<void>;
  /** SIGKILL at once and remove the data directory (signal handlers). */
  killNow(): void;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitForApi(url: string, child: ChildProcess, logFile: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the API exited with ${child.exitCode} before it answered; see ${logFile}:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
    try {
      // Any answer (401 without a key) means it listens.
      await fetch(`${url}/sandboxes`);
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`the API did not answer at ${url} within 120 s; see ${logFile}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * `apiDir`: the `apps/api` directory whose `src/main.ts` runs (default: this checkout's), e.g. another worktree's
 * for an A/B of two versions of the platform in one run. `nodeArgs`: flags for node itself (e.g. `--cpu-prof`,
 * which NODE_OPTIONS does not accept).
 */
export async function startApiProcess(
  settings: Record<string, string>,
  apiDir = join(dirname(fileURLToPath(import.meta.url)), '..'),
  nodeArgs: string[] = [],
): Promise<ApiProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-api-'));
  const logFile = join(dataDir, 'api.log');
  const port = await freePort();
  const apiKey = `e2b_${randomBytes(20).toString('hex')}`;
  const adminKey = `tpadmin_${randomBytes(24).toString('hex')}`;
  const out = openSync(logFile, 'a');
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', join(apiDir, 'src', 'main.ts')], {
    cwd: apiDir,
    env: {
      ...process.env,
      TIDEPOOL_HOST: '127.0.0.1',
      TIDEPOOL_PORT: String(port),
      TIDEPOOL_DATA_DIR: dataDir,
      TIDEPOOL_API_KEYS: apiKey,
      TIDEPOOL_ADMIN_KEY: adminKey,
      TIDEPOOL_WARM_POOL: 'off',
      TIDEPOOL_ON_SHUTDOWN: 'kill',
      TIDEPOOL_LOG_LEVEL: 'warn',
      // The desktop image is built by an API that lacks it: only the desktop section asks for that template.
      TIDEPOOL_DESKTOP_IMAGE: process.env.TIDEPOOL_DESKTOP_IMAGE ?? '',
      ...settings,
    },
    stdio: ['ignore', out, out],
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitForApi(url, child, logFile);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const db = new Database(join(dataDir, 'tidepool.db'), { readonly: true, fileMustExist: true });
  const row = db.prepare("SELECT value FROM settings WHERE key = 'platform_id'").get() as { value: string } | undefined;
  db.close();
  if (!row) throw new Error('the API did not record its platform id');
  const platformId = row.value;
  const label = `${PLATFORM_LABEL}=${platformId}`;
  return {
    url,
    apiKey,
    adminKey,
    platformId,
    pid: child.pid!,
    logFile,
    rssBytes: () => (parseKeyValues(readFileSync(`/proc/${child.pid}/status`, 'utf8')).get('VmRSS') ?? 0) * 1024,
    containers: async () => (await docker(['ps', '-aq', '--no-trunc', '--filter', `label=${label}`])).split('\n').filter(Boolean),
    removeContainers: () => removeContainersWhere(label),
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        const timeout = setTimeout(() => child.kill('SIGKILL'), 120_000);
        await exited;
        clearTimeout(timeout);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
    killNow() {
      if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
