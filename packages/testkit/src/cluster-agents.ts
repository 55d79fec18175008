/**
 * A node agent (`tidepool node`) per local-cluster node: started detached inside the node's network namespace
 * (so it reaches its containers' bridge addresses), listening with mutual TLS on the node's address, its engine
 * the node's unix socket. Its server certificate is the node's (the same one dockerd's TCP listener uses); only
 * clients with a certificate from the cluster CA are served. It holds no database settings: the API replicas find it
 * (TIDEPOOL_NODES) and ask who it is. Its pid and log live in the node's directory.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import type { NodeLayout } from './cluster-layout.ts';
import type { ClientTls, ServerTls } from './cluster-tls.ts';
import { repoRoot } from './docker.ts';
import { isProcessAlive } from './process-alive.ts';

export const NODE_AGENT_PORT = 7443;
/** Port of each agent's metrics listener (TIDEPOOL_NODE_METRICS_LISTEN) on the node's address. */
export const NODE_METRICS_PORT = 9464;

export interface AgentFiles {
  pidfile: string;
  logFile: string;
  dataDir: string;
}

export function agentFiles(node: Pick<NodeLayout, 'dir'>): AgentFiles {
  return { pidfile: join(node.dir, 'agent.pid'), logFile: join(node.dir, 'agent.log'), dataDir: join(node.dir, 'agent-data') };
}

export function agentUrl(node: Pick<NodeLayout, 'address'>): string {
  return `https://${node.address}:${NODE_AGENT_PORT}`;
}

/** The running agent of a node: the pid in its pidfile, if that process is still a `tidepool node`. */
export function agentPid(node: Pick<NodeLayout, 'dir'>): number | undefined {
  const { pidfile } = agentFiles(node);
  let pid: number;
  try {
    pid = Number(readFileSync(pidfile, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.some((arg) => arg.endsWith('apps/api/src/main.ts')) && cmdline.includes('node') ? pid : undefined;
  } catch {
    return undefined;
  }
}

function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}

/** GET /v1/health with the client certificate; true when the agent answers 200 as `nodeId`. */
export function agentAnswers(url: string, nodeId: string, tls: ClientTls, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const target = new URL('/v1/health', url);
    const req = request(
      { hostname: target.hostname, port: target.port, path: target.pathname, method: 'GET', ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key), timeout: timeoutMs, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          try {
            resolve(res.statusCode === 200 && (JSON.parse(body) as { nodeId?: string }).nodeId === nodeId);
          } catch {
            resolve(false);
          }
        });
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}

export interface StartAgentOptions {
  /** The node's server certificate (SANs: its node id and address) and the cluster CA. */
  serverTls: ServerTls;
  /** The client certificate used to check the agent answers. */
  clientTls: ClientTls;
  /** Stamped on the node's containers (TIDEPOOL_NODE_PLATFORM_ID): one per cluster. */
  platformId: string;
  timeoutMs?: number;
  /** The cluster's registry the agent pushes to and pulls from (plain HTTP on the private bridge: marked insecure). */
  registry?: { host: string; username: string; passwordFile: string };
  /** More environment for the agent process (tests: NODE_OPTIONS preloading a stand-in name resolver). */
  env?: Record<string, string>;
}

/** Starts a node's agent in its namespace and waits until it answers over mTLS; returns its URL and start time. */
export async function startNodeAgentProcess(node: NodeLayout, opts: StartAgentOptions): Promise<{ url: string; pid: number; startMs: number }> {
  if (agentPid(node) !== undefined) throw new ClusterError('exists', `the agent of ${node.id} is already running (pid ${agentPid(node)})`);
  const files = agentFiles(node);
  mkdirSync(files.dataDir, { recursive: true, mode: 0o700 });
  const url = agentUrl(node);
  const root = repoRoot();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TIDEPOOL_NODE_ID: node.id,
    TIDEPOOL_NODE_LISTEN: `${node.address}:${NODE_AGENT_PORT}`,
    TIDEPOOL_NODE_METRICS_LISTEN: `${node.address}:${NODE_METRICS_PORT}`,
    TIDEPOOL_NODE_URL: url,
    TIDEPOOL_NODE_TLS_CERT: opts.serverTls.cert,
    TIDEPOOL_NODE_TLS_KEY: opts.serverTls.key,
    TIDEPOOL_NODE_TLS_CA: opts.serverTls.ca,
    TIDEPOOL_NODE_PLATFORM_ID: opts.platformId,
    TIDEPOOL_DOCKER_HOST: `unix://${node.socket}`,
    TIDEPOOL_DATA_DIR: files.dataDir,
    TIDEPOOL_LXCFS: 'off',
    TIDEPOOL_LOG_LEVEL: process.env.TIDEPOOL_NODE_LOG_LEVEL || 'info',
    ...(opts.registry
      ? { TIDEPOOL_REGISTRY: opts.registry.host, TIDEPOOL_REGISTRY_USERNAME: opts.registry.username, TIDEPOOL_REGISTRY_PASSWORD_FILE: opts.registry.passwordFile, TIDEPOOL_REGISTRY_INSECURE: 'on' }
      : {}),
    ...opts.env,
  };
  const log = openSync(files.logFile, 'a');
  const started = Date.now();
  let child;
  try {
    child = spawn('nsenter', [`--net=/run/netns/${node.netns}`, process.execPath, '--import', 'tsx', join(root, 'apps/api/src/main.ts'), 'node'], {
      cwd: root,
      env,
      detached: true,
      stdio: ['ignore', log, log],
    });
  } finally {
    closeSync(log);
  }
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new ClusterError('missing-tool', `could not start the agent of ${node.id}: ${(await spawnError).message}`);
  writeFileSync(files.pidfile, `${pid}\n`);
  const deadline = started + (opts.timeoutMs ?? 120_000);
  while (Date.now() < deadline) {
    if (await agentAnswers(url, node.id, opts.clientTls)) return { url, pid, startMs: Date.now() - started };
    if (!isProcessAlive(pid) || child.exitCode !== null) {
      rmSync(files.pidfile, { force: true });
      throw new ClusterError('engine', `the agent of ${node.id} exited while starting:\n${logTail(files.logFile)}\n(full log: ${files.logFile})`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  await stopNodeAgentProcess(node);
  throw new ClusterError('engine', `the agent of ${node.id} did not answer at ${url} within ${opts.timeoutMs ?? 120_000} ms:\n${logTail(files.logFile)}\n(full log: ${files.logFile})`);
}

/** Stops a node's agent (SIGTERM, bounded wait, SIGKILL). Its sandboxes keep running. Safe when none runs. */
export async function stopNodeAgentProcess(node: Pick<NodeLayout, 'dir'>, timeoutMs = 10_000): Promise<{ graceful: boolean } | undefined> {
  const pid = agentPid(node);
  const { pidfile } = agentFiles(node);
  if (pid === undefined) {
    rmSync(pidfile, { force: true });
    return undefined;
  }
  const signal = (name: NodeJS.Signals): void => {
    try {
      process.kill(pid, name);
    } catch {
      // gone already
    }
  };
  signal('SIGCONT'); // a stopped (SIGSTOPped) agent cannot act on SIGTERM
  signal('SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const graceful = !isProcessAlive(pid);
  if (!graceful) {
    signal('SIGKILL');
    const killDeadline = Date.now() + 5_000;
    while (isProcessAlive(pid) && Date.now() < killDeadline) await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(pidfile, { force: true });
  return { graceful };
}
