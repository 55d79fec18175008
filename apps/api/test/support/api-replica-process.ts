/**
 * Real `tidepool api` processes as replicas of one platform on one PostgreSQL (the API-replica and local-cluster
 * suites): each its own data directory and loopback port, all sharing the database, the key and one node id (the
 * host's engine, embedded in each, is one node of the platform).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { removeTree } from '@tidepool/testkit';
import { replicaSecretsKey } from './start-platform.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../../../..');

export interface ApiReplica {
  url: string;
  process: ChildProcess;
  dataDir: string;
  /** Everything it wrote to stdout and stderr so far (pino lines at the level asked for). */
  output(): string;
  /** SIGKILL, at once: nothing of its shutdown runs. */
  kill(): Promise<void>;
  /** SIGTERM, waiting for it to exit (its sandboxes are kept: TIDEPOOL_ON_SHUTDOWN=keep). */
  stop(): Promise<void>;
  /** Stops it if running and removes its data directory. */
  dispose(): Promise<void>;
}

/** A key replicas share (`TIDEPOOL_API_KEYS`). */
export const replicaApiKey = (): string => `e2b_${randomBytes(20).toString('hex')}`;

/** Starts `tidepool api` (node + the tsx loader, so a SIGKILL reaches the API itself) and waits for its banner. */
export async function startApiReplica(options: { databaseUrl: string; apiKey: string; nodeId: string; env?: Record<string, string> }): Promise<ApiReplica> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-replica-'));
  const proc = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'apps/api/src/main.ts'), 'api'], {
    cwd: repoRoot,
    env: {
      ...process.env,
      TIDEPOOL_HOST: '127.0.0.1',
      TIDEPOOL_PORT: '0',
      TIDEPOOL_DATA_DIR: dataDir,
      TIDEPOOL_SANDBOX_NETWORK: 'tidepool-test',
      TIDEPOOL_LOG_LEVEL: 'warn',
      TIDEPOOL_DATABASE_URL: options.databaseUrl,
      // Replicas of one database share the secrets key (the token seed is derived from it).
      TIDEPOOL_SECRETS_KEY: replicaSecretsKey(options.databaseUrl),
      TIDEPOOL_API_KEYS: options.apiKey,
      TIDEPOOL_NODE_ID: options.nodeId,
      TIDEPOOL_ON_SHUTDOWN: 'keep',
      // Warm pools are per replica (not shared yet): off, so every container on the engine is a sandbox's.
      TIDEPOOL_WARM_POOL: 'off',
      // No desktop template (a missing image would be built by every replica of every run).
      TIDEPOOL_DESKTOP_IMAGE: '',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stderr!.on('data', (chunk) => void (output += String(chunk)));
  proc.stdout!.on('data', (chunk) => void (output += String(chunk)));
  const exited = new Promise<void>((done) => proc.once('close', () => done()));
  let failed: ((code: number | null) => void) | undefined;
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`tidepool api did not start in 120 s:\n${output}`));
    }, 120_000);
    failed = (code) => {
      clearTimeout(timer);
      reject(new Error(`tidepool api exited with ${code}:\n${output}`));
    };
    proc.once('exit', failed);
    const check = (): void => {
      const found = /Tidepool is running at (http:\/\/\S+)/.exec(output)?.[1];
      if (!found) return;
      clearTimeout(timer);
      proc.stdout!.off('data', check);
      resolveUrl(found);
    };
    proc.stdout!.on('data', check);
  }).finally(() => proc.off('exit', failed!));
  const running = (): boolean => proc.exitCode === null && proc.signalCode === null;
  const replica: ApiReplica = {
    url,
    process: proc,
    dataDir,
    output: () => output,
    async kill() {
      if (running()) proc.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (running()) proc.kill('SIGTERM');
      await exited;
    },
    async dispose() {
      await replica.stop();
      removeTree(dataDir);
    },
  };
  return replica;
}
