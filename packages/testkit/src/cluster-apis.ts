/**
 * The local cluster's API replicas: `tidepool api` processes on the host (detached, they outlive the CLI), each
 * on its own loopback port, all on the cluster's PostgreSQL and driving the node agents over mutual TLS with the
 * cluster's client certificate (TIDEPOOL_CLUSTER_CLIENT_*). Their data directories are `<dir>/api<i>/data`; the
 * environment variable TIDEPOOL_DATA_DIR naming that directory is how `down` finds a replica even without its
 * pidfile (a crashed CLI, a lost state file).
 *
 * Until the API can run without an engine of its own, each replica also embeds a node on the host's Docker
 * engine (node id `api<i>`, its sandboxes on the network `tp-<name>-sandboxes`, no warm pool, no lxcfs); the
 * local cluster marks those nodes draining so sandboxes go to the agents (see local-cluster.ts).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import type { ClusterLayout } from './cluster-layout.ts';
import type { ClientTls } from './cluster-tls.ts';
import { repoRoot } from './docker.ts';
import { isProcessAlive } from './process-alive.ts';

export interface ApiFiles {
  id: string;
  dir: string;
  dataDir: string;
  pidfile: string;
  logFile: string;
}

export function apiFiles(cluster: Pick<ClusterLayout, 'dir'>, index: number): ApiFiles {
  const id = `api${index}`;
  const dir = join(cluster.dir, id);
  return { id, dir, dataDir: join(dir, 'data'), pidfile: join(dir, 'api.pid'), logFile: join(dir, 'api.log') };
}

/** The host engine's network for the replicas' embedded nodes (named from the cluster, so `down` finds it). */
export function replicaSandboxNetwork(cluster: Pick<ClusterLayout, 'prefix'>): string {
  return `${cluster.prefix}sandboxes`;
}

function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** Replica processes of a cluster: TIDEPOOL_DATA_DIR is `<dir>/api<i>/data` (never a shell that merely cd'd there). */
export function replicaProcesses(clusterDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const dataDir = environOf(Number(entry)).find((line) => line.startsWith('TIDEPOOL_DATA_DIR='))?.slice('TIDEPOOL_DATA_DIR='.length);
    if (dataDir !== undefined && dataDir.startsWith(`${clusterDir}/`) && /^api\d+\/data$/.test(dataDir.slice(clusterDir.length + 1))) pids.push(Number(entry));
  }
  return pids;
}

/** The running replica: the pid in its pidfile, if that process still has this replica's data directory. */
export function apiPid(files: ApiFiles): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(files.pidfile, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  return environOf(pid).includes(`TIDEPOOL_DATA_DIR=${files.dataDir}`) ? pid : undefined;
}

function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}

export interface StartApiOptions {
  cluster: ClusterLayout;
  index: number;
  port: number;
  database: { url: string; passwordFile: string };
  clientTls: ClientTls;
  apiKey: string;
  adminKey: string;
  nodeLostAfterSeconds: number;
  /** The cluster's registry (plain HTTP on the bridge): images move between nodes through it. */
  registry: { host: string; username: string; passwordFile: string };
  /** The node agents (`https://address:port` each): TIDEPOOL_NODES. */
  nodes: string[];
  /** The secrets key every replica shares (the token seed is derived from it): TIDEPOOL_SECRETS_KEY. */
  secretsKey: string;
  timeoutMs?: number;
}

/** The cluster's secrets key (base64 of 32 bytes), made once in `<dir>/secrets-key` (0600): every replica gets it. */
export function clusterSecretsKey(cluster: Pick<ClusterLayout, 'dir'>): string {
  const file = join(cluster.dir, 'secrets-key');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    const key = randomBytes(32).toString('base64');
    writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  }
}

/** Starts replica `api<index>` and waits until it answers `/health`; returns its URL and start time. */
export async function startApiReplica(opts: StartApiOptions): Promise<{ id: string; url: string; pid: number; startMs: number; logFile: string }> {
  const files = apiFiles(opts.cluster, opts.index);
  if (apiPid(files) !== undefined) throw new ClusterError('exists', `${files.id} is already running (pid ${apiPid(files)})`);
  mkdirSync(files.dataDir, { recursive: true, mode: 0o700 });
  const url = `http://127.0.0.1:${opts.port}`;
  const root = repoRoot();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TIDEPOOL_HOST: '127.0.0.1',
    TIDEPOOL_PORT: String(opts.port),
    TIDEPOOL_DATA_DIR: files.dataDir,
    TIDEPOOL_DATABASE_URL: opts.database.url,
    TIDEPOOL_DATABASE_PASSWORD_FILE: opts.database.passwordFile,
    TIDEPOOL_API_KEYS: opts.apiKey,
    TIDEPOOL_ADMIN_KEY: opts.adminKey,
    TIDEPOOL_CLUSTER_CA: opts.clientTls.ca,
    TIDEPOOL_CLUSTER_CLIENT_CERT: opts.clientTls.cert,
    TIDEPOOL_CLUSTER_CLIENT_KEY: opts.clientTls.key,
    TIDEPOOL_NODE_LOST_AFTER_SECONDS: String(opts.nodeLostAfterSeconds),
    TIDEPOOL_NODES: opts.nodes.join(','),
    TIDEPOOL_SECRETS_KEY: opts.secretsKey,
    // Images across nodes (an API without these settings ignores them, and images stay on the node that made them).
    TIDEPOOL_REGISTRY: opts.registry.host,
    TIDEPOOL_REGISTRY_USERNAME: opts.registry.username,
    TIDEPOOL_REGISTRY_PASSWORD_FILE: opts.registry.passwordFile,
    TIDEPOOL_REGISTRY_INSECURE: 'on',
    // No engine of its own: every sandbox is on the agents. (An API without TIDEPOOL_EMBEDDED_NODE would keep an
    // embedded node; it gets its own id, network, no pool, and `up` drains it.)
    TIDEPOOL_EMBEDDED_NODE: 'off',
    TIDEPOOL_NODE_ID: files.id,
    TIDEPOOL_SANDBOX_NETWORK: replicaSandboxNetwork(opts.cluster),
    TIDEPOOL_WARM_POOL: 'off',
    TIDEPOOL_LXCFS: 'off',
    TIDEPOOL_DEFAULT_TIMEOUT: '300',
    TIDEPOOL_MAX_SANDBOXES: '500',
    TIDEPOOL_LOG_LEVEL: process.env.TIDEPOOL_API_LOG_LEVEL || 'info',
  };
  const log = openSync(files.logFile, 'a');
  const started = Date.now();
  let child;
  try {
    child = spawn(process.execPath, ['--import', 'tsx', join(root, 'apps/api/src/main.ts'), 'api'], { cwd: root, env, detached: true, stdio: ['ignore', log, log] });
  } finally {
    closeSync(log);
  }
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new ClusterError('missing-tool', `could not start ${files.id}: ${(await spawnError).message}`);
  writeFileSync(files.pidfile, `${pid}\n`);
  const timeoutMs = opts.timeoutMs ?? 180_000;
  const deadline = started + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.ok) return { id: files.id, url, pid, startMs: Date.now() - started, logFile: files.logFile };
    } catch {
      // not listening yet
    }
    if (!isProcessAlive(pid) || child.exitCode !== null) {
      rmSync(files.pidfile, { force: true });
      throw new ClusterError('engine', `${files.id} exited while starting:\n${logTail(files.logFile)}\n(full log: ${files.logFile})`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  await stopApiReplica(files);
  throw new ClusterError('engine', `${files.id} did not answer at ${url}/health within ${timeoutMs} ms:\n${logTail(files.logFile)}\n(full log: ${files.logFile})`);
}

/**
 * Stops a replica: SIGTERM (it keeps its sandboxes: TIDEPOOL_ON_SHUTDOWN defaults to keep), SIGKILL after
 * `timeoutMs`, or at once with `kill` (a replica dying mid-burst). Safe when none runs.
 */
export async function stopApiReplica(files: ApiFiles, opts: { kill?: boolean; timeoutMs?: number } = {}): Promise<{ graceful: boolean } | undefined> {
  const pid = apiPid(files);
  if (pid === undefined) {
    rmSync(files.pidfile, { force: true });
    return undefined;
  }
  const signal = (name: NodeJS.Signals): void => {
    try {
      process.kill(pid, name);
    } catch {
      // gone already
    }
  };
  signal(opts.kill ? 'SIGKILL' : 'SIGTERM');
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  while (isProcessAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const graceful = !opts.kill && !isProcessAlive(pid);
  if (isProcessAlive(pid)) {
    signal('SIGKILL');
    const killDeadline = Date.now() + 5_000;
    while (isProcessAlive(pid) && Date.now() < killDeadline) await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(files.pidfile, { force: true });
  return { graceful };
}
