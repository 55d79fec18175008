/**
 * A real image registry for pull tests and the local cluster: Debian's `docker-registry` package (installed
 * when missing, as CI starts from a fresh Debian as root) with htpasswd authentication, plain HTTP.
 *
 * By default it listens on 127.0.0.1 (the Docker engine treats 127.0.0.0/8 registries as insecure, so plain
 * HTTP works) and lives as long as the calling process. The local cluster runs it on its bridge address (the
 * node engines are started with --insecure-registry for it) and `detached`, so it outlives the CLI; then it is
 * stopped by pid (stopRegistryIn) and its directory is the cluster's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import { killAll, nodeProcesses } from './cluster-leftovers.ts';
import { docker, run } from './docker.ts';
import { getFreePort } from './ports.ts';
import { isProcessAlive } from './process-alive.ts';

const REGISTRY_BINARY = '/usr/bin/docker-registry';
const HTPASSWD = '/usr/bin/htpasswd';

export interface LocalRegistry {
  /** `<address>:<port>` */
  host: string;
  username: string;
  password: string;
  pid: number;
  /** Tags `image` as `<host>/<name>` and pushes it from the host engine (logged in with a throwaway Docker config). */
  push(image: string, name: string): Promise<string>;
  stop(): Promise<void>;
}

export interface LocalRegistryOptions {
  /** Listen address (default 127.0.0.1). */
  address?: string;
  /** Default: a free port. */
  port?: number;
  /** Where config, htpasswd, data and log go (default: a new temporary directory, removed on stop). */
  dir?: string;
  /** Outlive this process (stdio to `<dir>/registry.log`); stop with stop() or stopRegistryIn(dir). */
  detached?: boolean;
}

async function ensureInstalled(): Promise<void> {
  if (existsSync(REGISTRY_BINARY) && existsSync(HTPASSWD)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = (): Promise<number | null> =>
    new Promise((resolve) => {
      const child = spawn('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'docker-registry', 'apache2-utils'], { stdio: 'ignore', env });
      child.on('close', resolve);
      child.on('error', () => resolve(-1));
    });
  if ((await install()) !== 0) {
    await run('apt-get', ['update', '-q'], { timeoutMs: 300_000 });
    if ((await install()) !== 0) throw new ClusterError('missing-tool', 'could not install docker-registry and apache2-utils with apt-get (run as root on Debian)');
  }
}

async function waitForAnswer(url: string, pid: number, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (!isProcessAlive(pid)) throw new ClusterError('command', `docker-registry exited: ${log()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      if (response.status === 401 || response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new ClusterError('command', `docker-registry did not answer at ${url}: ${log()}`);
}

/** Stops a (detached) registry whose directory is `dir`: every process naming that directory. Idempotent. */
export async function stopRegistryIn(dir: string): Promise<void> {
  await killAll(nodeProcesses({ dir }));
}

export async function startLocalRegistry(opts: LocalRegistryOptions = {}): Promise<LocalRegistry> {
  await ensureInstalled();
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'tidepool-registry-')));
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const port = opts.port ?? (await getFreePort());
  const host = `${opts.address ?? '127.0.0.1'}:${port}`;
  const username = 'builder';
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const htpasswd = await run(HTPASSWD, ['-Bbn', username, password]);
  if (htpasswd.exitCode !== 0) throw new ClusterError('command', `htpasswd failed: ${htpasswd.stderr}`);
  await writeFile(join(dir, 'htpasswd'), htpasswd.stdout);
  await writeFile(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log:',
      '  level: error',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'data')}`,
      // Images the platform deletes (templates, snapshots) are removed by manifest digest.
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: ${host}`,
      '  secret: tidepool-test-secret',
      'auth:',
      '  htpasswd:',
      '    realm: tidepool-test',
      `    path: ${join(dir, 'htpasswd')}`,
      '',
    ].join('\n'),
  );
  let output = '';
  let child: ChildProcess;
  const logFile = join(dir, 'registry.log');
  if (opts.detached) {
    const log = openSync(logFile, 'a');
    try {
      child = spawn(REGISTRY_BINARY, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', log, log], detached: true });
    } finally {
      closeSync(log);
    }
    child.unref();
  } else {
    child = spawn(REGISTRY_BINARY, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
    child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
  }
  const pid = child.pid ?? -1;
  const log = (): string => (opts.detached ? readTail(logFile) : output);
  const stop = async (): Promise<void> => {
    if (pid > 0 && isProcessAlive(pid)) {
      child.kill('SIGTERM');
      const deadline = Date.now() + 5_000;
      while (isProcessAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (isProcessAlive(pid)) await killAll([pid]);
    }
    if (ownDir) await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForAnswer(`http://${host}/v2/`, pid, log);
  } catch (error) {
    await stop();
    throw error;
  }
  const dockerConfig = join(dir, 'docker-config');
  const withConfig = async (args: string[], input?: string): Promise<void> => {
    const res = await run('docker', ['--config', dockerConfig, ...args], { input, timeoutMs: 300_000 });
    if (res.exitCode !== 0) throw new ClusterError('command', `docker ${args[0]} failed: ${res.stderr || res.stdout}`);
  };
  return {
    host,
    username,
    password,
    pid,
    async push(image, name) {
      const ref = `${host}/${name}`;
      await docker(['tag', image, ref]);
      await withConfig(['login', host, '-u', username, '--password-stdin'], password);
      await withConfig(['push', ref]);
      return ref;
    },
    stop,
  };
}

function readTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(-4_000);
  } catch {
    return '';
  }
}
