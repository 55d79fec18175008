/**
 * A Docker engine per cluster node: `dockerd` started inside the node's network namespace (entered with
 * `nsenter --net`, which keeps the host's mount namespace and so its cgroup mounts; `ip netns exec` remounts
 * /sys and dockerd then finds no cgroups), with everything of its own under the node's directory: data root,
 * exec root (its containerd's sockets), pidfile, unix socket, log. It listens on that unix socket and, when
 * given TLS material, on `tcp://<node address>:2376` with --tlsverify (client certificates from the cluster CA
 * only). Its containers' bridge and address pool are private ranges only routed inside the namespace.
 *
 * The engine is started detached: it outlives the process that started it (the CLI exits after `up`). Stopping
 * finds it by its pidfile, and then anything it left by what the node owns (see cluster-leftovers.ts).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { ClusterError } from './cluster-error.ts';
import { NODE_ADDRESS_POOL, NODE_TLS_PORT, type NodeLayout } from './cluster-layout.ts';
import { cgroupProcesses, killAll, nodeProcesses, removeCgroups, unmountUnder } from './cluster-leftovers.ts';
import type { ServerTls } from './cluster-tls.ts';
import { run, type RunResult } from './docker.ts';
import { isProcessAlive } from './process-alive.ts';

export type StorageDriver = 'overlay2' | 'vfs';

export interface StartEngineOptions {
  /** `auto` tries overlay2 and falls back to vfs when the engine will not start with it. */
  storageDriver?: StorageDriver | 'auto';
  /** `host:port` registries the engine may use over plain HTTP (the cluster's local registry). */
  insecureRegistries?: string[];
  /** Listen on tcp://<address>:2376 with --tlsverify using this material. */
  tls?: ServerTls;
  /** How long to wait for the engine to answer (default 60 s). */
  timeoutMs?: number;
  /**
   * Make the node look like a machine of its own (the Swarm stack needs it): the engine runs in a mount and UTS
   * namespace of its own, with `hostname` as its host name, a fresh tmpfs on /run (its own /run/docker.sock, never
   * the host engine's), and the given host directories bound over the paths a machine's engine uses
   * (`[source, target]`, e.g. the agent's /var/lib/tidepool/node, /etc/docker with its certs.d). Targets must exist.
   */
  machine?: { hostname: string; binds: [string, string][] };
}

/** The socket a machine-mode engine also listens on, inside its own mount namespace (a fresh /run). */
export const MACHINE_DOCKER_SOCKET = '/var/run/docker.sock';

/**
 * Run by `sh -c` in the node's new mount and UTS namespaces before dockerd: `$1` the host name, then source/target
 * pairs up to `--`, then dockerd's command line. Mounts made here stay in the node's namespace (propagation slave).
 */
const MACHINE_SCRIPT = [
  'set -eu',
  'hostname "$1"; shift',
  'mount -t tmpfs -o mode=0755 tmpfs /run',
  'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done',
  'shift',
  'exec "$@"',
].join('\n');

export interface StartedEngine {
  pid: number;
  storageDriver: StorageDriver;
  /** From spawning dockerd until /_ping answered. */
  startMs: number;
  /** `tcp://<address>:2376` when TLS was given. */
  tcpHost?: string;
}

function logTail(node: NodeLayout): string {
  try {
    return readFileSync(node.logFile, 'utf8').split('\n').filter((l) => /level=(error|fatal)|failed|error/i.test(l)).slice(-5).join('\n');
  } catch {
    return '(no log)';
  }
}

/** GET /_ping on the node's unix socket; true when the engine answers OK. */
export function pingEngine(socket: string, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath: socket, path: '/_ping', method: 'GET', timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** The running dockerd of a node: the pid in its pidfile, if that process still names the pidfile. */
export function enginePid(node: NodeLayout): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(node.pidfile, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes(node.pidfile) ? pid : undefined;
  } catch {
    return undefined;
  }
}

function dockerdArgs(node: NodeLayout, driver: StorageDriver, opts: StartEngineOptions): string[] {
  const args = [
    'dockerd',
    '--config-file', node.configFile,
    '--data-root', node.dataRoot,
    '--exec-root', node.execRoot,
    '--pidfile', node.pidfile,
    '--host', `unix://${node.socket}`,
    '--bip', node.bip,
    '--default-address-pool', NODE_ADDRESS_POOL,
    '--cgroup-parent', node.cgroupParent,
    '--storage-driver', driver,
    '--shutdown-timeout', '5',
    '--log-level', 'warn',
  ];
  for (const registry of opts.insecureRegistries ?? []) args.push('--insecure-registry', registry);
  if (opts.tls) {
    args.push('--host', `tcp://${node.address}:${NODE_TLS_PORT}`, '--tlsverify', '--tlscacert', opts.tls.ca, '--tlscert', opts.tls.cert, '--tlskey', opts.tls.key);
  }
  const net = `--net=/run/netns/${node.netns}`;
  if (!opts.machine) return [net, ...args];
  args.push('--host', `unix://${MACHINE_DOCKER_SOCKET}`);
  const binds = opts.machine.binds.flatMap(([source, target]) => [source, target]);
  return [net, 'unshare', '--mount', '--uts', '--propagation', 'slave', 'sh', '-c', MACHINE_SCRIPT, 'sh', opts.machine.hostname, ...binds, '--', ...args];
}

async function startOnce(node: NodeLayout, driver: StorageDriver, opts: StartEngineOptions): Promise<StartedEngine> {
  mkdirSync(node.dir, { recursive: true, mode: 0o700 });
  // An empty config file: the host engine's /etc/docker/daemon.json must not apply to a node.
  writeFileSync(node.configFile, '{}\n');
  rmSync(node.socket, { force: true });
  const log = openSync(node.logFile, 'a');
  const started = Date.now();
  let child;
  try {
    child = spawn('nsenter', dockerdArgs(node, driver, opts), { detached: true, stdio: ['ignore', log, log] });
  } finally {
    closeSync(log);
  }
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new ClusterError('missing-tool', `could not start dockerd for ${node.id}: ${(await spawnError).message} (is util-linux's nsenter installed?)`);
  const deadline = started + (opts.timeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    if (await pingEngine(node.socket)) {
      return { pid, storageDriver: driver, startMs: Date.now() - started, tcpHost: opts.tls ? `tcp://${node.address}:${NODE_TLS_PORT}` : undefined };
    }
    if (!isProcessAlive(pid) || child.exitCode !== null) throw new ClusterError('engine', `dockerd of ${node.id} (storage driver ${driver}) exited while starting:\n${logTail(node)}\n(full log: ${node.logFile})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new ClusterError('engine', `dockerd of ${node.id} did not answer on ${node.socket} within ${opts.timeoutMs ?? 60_000} ms:\n${logTail(node)}\n(full log: ${node.logFile})`);
}

/**
 * Starts a node's engine (its network namespace must exist) and waits until it answers. With storage driver
 * `auto`, an engine that will not start on overlay2 is cleaned up and started again on vfs.
 */
export async function startNodeEngine(node: NodeLayout, opts: StartEngineOptions = {}): Promise<StartedEngine> {
  if (enginePid(node) !== undefined) throw new ClusterError('exists', `the engine of ${node.id} is already running (pid ${enginePid(node)})`);
  const wanted = opts.storageDriver ?? 'auto';
  const first: StorageDriver = wanted === 'vfs' ? 'vfs' : 'overlay2';
  try {
    return await startOnce(node, first, opts);
  } catch (error) {
    await stopNodeEngine(node);
    if (wanted !== 'auto') throw error;
    // overlay2 may be refused (e.g. a data root on overlayfs); its half-made layer store is no use to vfs.
    await unmountUnder(node.dataRoot);
    rmSync(node.dataRoot, { recursive: true, force: true });
    try {
      return await startOnce(node, 'vfs', opts);
    } catch (fallbackError) {
      await stopNodeEngine(node);
      throw new ClusterError('engine', `${(error as Error).message}\nand with vfs: ${(fallbackError as Error).message}`);
    }
  }
}

export interface StopResult {
  /** The engine exited on SIGTERM within the timeout. */
  graceful: boolean;
  /** Leftover processes that had to be killed (container processes, shims, containerd). */
  killed: number;
}

/**
 * Stops a node's engine: SIGTERM, bounded wait, SIGKILL; then kills whatever of the node survived (processes in
 * its namespace or naming its directory, processes in its cgroups), unmounts everything under its directory and
 * removes its cgroups. Safe to call when nothing runs (after a crash, twice).
 */
export async function stopNodeEngine(node: NodeLayout, timeoutMs = 20_000): Promise<StopResult> {
  const pid = enginePid(node);
  let graceful = true;
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // exited on its own since the pidfile was read
    }
    const deadline = Date.now() + timeoutMs;
    while (isProcessAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (isProcessAlive(pid)) {
      graceful = false;
      await killAll([pid]);
    }
  }
  const leftovers = [...new Set([...nodeProcesses({ netns: node.netns, dir: node.dir }), ...cgroupProcesses(node.cgroupParent)])];
  const stuck = await killAll(leftovers);
  if (stuck.length > 0) throw new ClusterError('engine', `processes of ${node.id} survived SIGKILL: ${stuck.join(', ')}`);
  const mounted = await unmountUnder(node.dir);
  if (mounted.length > 0) throw new ClusterError('engine', `could not unmount under ${node.dir}: ${mounted.join(', ')}`);
  removeCgroups(node.cgroupParent);
  rmSync(node.socket, { force: true });
  rmSync(node.pidfile, { force: true });
  return { graceful, killed: leftovers.length };
}

/** `docker -H unix://<node socket> <args>`; never throws for a non-zero exit. */
export function nodeDocker(node: Pick<NodeLayout, 'socket'>, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<RunResult> {
  return run('docker', ['-H', `unix://${node.socket}`, ...args], { timeoutMs: opts.timeoutMs ?? 300_000, input: opts.input });
}

/**
 * Copies an image from the host engine into a node's engine (`docker save <image> | docker -H <node> load`):
 * node engines start with no images and no container registry is reachable.
 */
export function loadImageIntoNode(image: string, node: Pick<NodeLayout, 'socket' | 'id'>): Promise<void> {
  if (!existsSync(node.socket)) return Promise.reject(new ClusterError('engine', `${node.id} has no engine socket at ${node.socket}: is it running?`));
  return new Promise((resolve, reject) => {
    const save = spawn('docker', ['save', image], { stdio: ['ignore', 'pipe', 'pipe'] });
    const load = spawn('docker', ['-H', `unix://${node.socket}`, 'load', '--quiet'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let errors = '';
    save.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    load.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    load.stdout.resume();
    save.stdout.pipe(load.stdin);
    load.stdin.on('error', () => undefined); // load died first: its exit code says so
    let saveCode: number | null | undefined;
    save.on('close', (code) => (saveCode = code));
    save.on('error', (error) => reject(new ClusterError('missing-tool', `docker save: ${error.message}`)));
    load.on('error', (error) => reject(new ClusterError('missing-tool', `docker load: ${error.message}`)));
    load.on('close', (code) => {
      const finish = (): void => {
        if (saveCode === 0 && code === 0) resolve();
        else reject(new ClusterError('command', `loading ${image} into ${node.id} failed (save exit ${saveCode}, load exit ${code}): ${errors.trim()}`));
      };
      if (saveCode !== undefined) finish();
      else save.once('close', finish);
    });
  });
}
