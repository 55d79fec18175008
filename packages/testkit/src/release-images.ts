/**
 * The production images (docker/cluster/tidepool/Dockerfile) as the release test and the `images` benchmark section
 * measure them: build them under a prefix of one's own, their sizes, and how soon the node-agent image answers on a
 * node of a local cluster.
 *
 * Agent start: the image runs on the node's engine as the Swarm stack runs it (host network of the node, the
 * node's engine socket, its own server certificate), is started `starts` times, and after each start it is asked
 * for /v1/health over mutual TLS every 20 ms until it answers. Times are taken from the kernel: the age of the
 * agent's process (since its fork by the container runtime, /proc/<pid>/stat) at the first answer, and how long its
 * main thread waited in the run queue for a CPU by then (/proc/<pid>/schedstat). The second figure matters on a
 * machine whose cores are shared: age − wait is what the start takes when the agent gets a CPU whenever it wants
 * one (its own work plus the engine calls it waits for).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ensureClusterTls, ensureNodeServerTls } from './cluster-tls.ts';
import { nodeDocker } from './cluster-engines.ts';
import type { NodeLayout } from './cluster-layout.ts';

/** What of a node the measurement uses (a ClusterNodeState or a NodeLayout). */
type AgentNode = Pick<NodeLayout, 'id' | 'address' | 'socket'>;
import { repoRoot, run } from './docker.ts';

export const RELEASE_IMAGE_NAMES = ['api', 'node-agent', 'postgres', 'registry'] as const;

/** `docker/cluster/build-images.sh` under `prefix`; the four image names it printed. */
export async function buildReleaseImages(prefix: string, timeoutMs = 40 * 60_000): Promise<string[]> {
  const built = await run('bash', [join(repoRoot(), 'docker/cluster/build-images.sh')], { env: { TIDEPOOL_IMAGE_PREFIX: prefix }, timeoutMs });
  if (built.exitCode !== 0) throw new Error(`docker/cluster/build-images.sh failed:\n${built.stderr.slice(-4_000)}`);
  return built.stdout.trim().split('\n');
}

/** `docker image inspect --format {{.Size}}` in bytes. */
export async function imageSize(image: string): Promise<number> {
  const res = await run('docker', ['image', 'inspect', '--format', '{{.Size}}', image]);
  if (res.exitCode !== 0) throw new Error(`docker image inspect ${image}: ${res.stderr}`);
  return Number(res.stdout.trim());
}

export interface AgentStart {
  /** Age of the agent's process at its first mutual-TLS answer (ms). */
  answerMs: number;
  /** How long its main thread had waited for a CPU by then (ms). */
  runQueueMs: number;
  /** answerMs − runQueueMs. */
  withCpuMs: number;
  /** CPU time of its main thread by then (ms). */
  cpuMs: number;
  /** The machine's 1-minute load average then. */
  load: number;
}

function tlsGet(url: string, tls: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ...tls, method: 'GET', timeout: 2_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** Milliseconds since `pid` was forked and its main thread's CPU and run-queue times, from /proc. */
function processTimes(pid: number): { ageMs: number; cpuMs: number; runQueueMs: number } {
  const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, starttime field 22 (clock ticks).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [onCpuNs, waitNs] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
  return { ageMs: Math.round((uptime - Number(fields[19]) / 100) * 1000), cpuMs: Math.round(onCpuNs! / 1e6), runQueueMs: Math.round(waitNs! / 1e6) };
}

/**
 * Starts the node-agent `image` (loaded into `node`'s engine already) `starts` times as container `name` and
 * measures each start (see the top of this file). The container is left stopped; its files go under `workDir`.
 */
export async function measureAgentStarts(opts: { image: string; node: AgentNode; workDir: string; name: string; starts: number }): Promise<AgentStart[]> {
  const { image, node, workDir, name } = opts;
  const tlsDir = join(workDir, 'agent-tls');
  const client = await ensureClusterTls(tlsDir);
  const server = await ensureNodeServerTls(tlsDir, 'node1', node.address);
  writeFileSync(join(tlsDir, 'node.pem'), readFileSync(server.cert));
  writeFileSync(join(tlsDir, 'node-key.pem'), readFileSync(server.key), { mode: 0o600 });
  const dataDir = join(workDir, 'agent-data');
  mkdirSync(dataDir, { recursive: true });
  const created = await nodeDocker(node, [
    'create', '--name', name, '--network', 'host',
    '-v', `${node.socket}:/var/run/docker.sock`, '-v', `${tlsDir}:/tls:ro`, '-v', `${dataDir}:/var/lib/tidepool/node`,
    '-e', 'TIDEPOOL_NODE_ID=node1', '-e', `TIDEPOOL_NODE_LISTEN=${node.address}:7443`,
    '-e', 'TIDEPOOL_NODE_TLS_CERT=/tls/node.pem', '-e', 'TIDEPOOL_NODE_TLS_KEY=/tls/node-key.pem', '-e', 'TIDEPOOL_NODE_TLS_CA=/tls/ca.pem',
    '-e', 'TIDEPOOL_DATA_DIR=/var/lib/tidepool/node', '-e', `TIDEPOOL_VOLUMES_HOST_DIR=${dataDir}/volumes`, '-e', 'TIDEPOOL_LXCFS=off',
    // The image has no iptables yet and the node no base image for the helper: isolation is reported off, not refused.
    '-e', 'TIDEPOOL_SANDBOX_ISOLATION=warn',
    image,
  ]);
  if (created.exitCode !== 0) throw new Error(`docker create ${image} on ${node.id}: ${created.stderr}`);
  const url = `https://${node.address}:7443/v1/health`;
  const tls = { ca: readFileSync(client.ca), cert: readFileSync(client.cert), key: readFileSync(client.key) };
  const results: AgentStart[] = [];
  for (let attempt = 0; attempt < opts.starts; attempt++) {
    const start = await nodeDocker(node, ['start', name]);
    if (start.exitCode !== 0) throw new Error(`docker start ${name}: ${start.stderr}`);
    const pid = Number((await nodeDocker(node, ['inspect', '--format', '{{.State.Pid}}', name])).stdout.trim());
    if (!(pid > 0)) throw new Error(`${name} is not running after docker start:\n${(await nodeDocker(node, ['logs', '--tail', '30', name])).stderr}`);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const answer = await tlsGet(url, tls).catch(() => undefined);
      if (answer) {
        const times = processTimes(pid);
        if (answer.status !== 200 || (JSON.parse(answer.body) as { nodeId?: string }).nodeId !== 'node1') {
          throw new Error(`the agent answered ${answer.status} ${answer.body}`);
        }
        results.push({ answerMs: times.ageMs, runQueueMs: times.runQueueMs, withCpuMs: times.ageMs - times.runQueueMs, cpuMs: times.cpuMs, load: Math.round(loadavg()[0]! * 10) / 10 });
        break;
      }
      if (Date.now() > deadline) throw new Error(`the agent did not answer within a minute:\n${(await nodeDocker(node, ['logs', '--tail', '30', name])).stdout}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const stop = await nodeDocker(node, ['stop', '--time', '30', name]);
    if (stop.exitCode !== 0) throw new Error(`docker stop ${name}: ${stop.stderr}`);
  }
  return results;
}

/** The middle value (the lower middle of an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
