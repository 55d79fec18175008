/**
 * `BENCH_SECTIONS=node-hop`: what the node hop adds to a request (issue 17: ≤ 1 ms p50). One API in this process
 * embeds its node (the host's engine, dialled directly) and drives a one-node local cluster's agent over mutual TLS
 * (as apps/api/test/cluster-mode.test.ts does: the agent's row is heartbeated by this process). One sandbox on each
 * node (placed by draining the other node through `POST /nodes/{id}`); then, interleaved A/B/A/B in the same run:
 * BENCH_NODE_HOP_REQUESTS (1000) `GET /health` of envd through the API's proxy (routing headers, one keep-alive
 * client connection), and BENCH_NODE_HOP_COMMANDS (200) `commands.run('true')` through the published SDK. Printed:
 * p50/p99 of each on each node and the p50 the hop adds, with the load average around the run (the agent, its
 * engine and the API share this machine's cores). Before those, BENCH_NODE_HOP_CREATES (20) creates per node,
 * interleaved: create→first command (`Sandbox.create` + `commands.run('true')`, the drain toggles and the agent
 * scrape between the two left out of the time) p50/p95 on each node and their ratio, and for every remote create
 * what the agent's own metrics (TIDEPOOL_NODE_METRICS_LISTEN) counted while `Sandbox.create` ran: node-channel
 * runtime calls by operation (`tidepool_agent_engine_call_duration_seconds_count`) and tunnels opened
 * (`tidepool_agent_tunnel_streams_total`: before a node-side boot, the API's envd port probes, `/health` and
 * `/init` each took one). Root only.
 */
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { BASE_IMAGE, downCluster, freeClusterSlot, NODE_METRICS_PORT, upCluster, type ClusterState } from '@tidepool/testkit';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { api, startTestPlatform, type TestPlatform } from '../test/support/start-platform.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';

const REQUESTS = Number(process.env.BENCH_NODE_HOP_REQUESTS ?? 1000);
const COMMANDS = Number(process.env.BENCH_NODE_HOP_COMMANDS ?? 200);
const CREATES = Number(process.env.BENCH_NODE_HOP_CREATES ?? 20);
const EMBEDDED = 'api-node';
const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' / ');

/** envd's `GET /health` through the proxy on one keep-alive connection; resolves with the milliseconds it took. */
function healthThroughProxy(url: URL, agent: http.Agent, sandboxId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = now();
    const req = http.request({ host: url.hostname, port: url.port, path: '/health', agent, headers: { 'e2b-sandbox-id': sandboxId, 'e2b-sandbox-port': '49983' } }, (res) => {
      res.resume();
      res.once('end', () => (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300 ? resolve(now() - start) : reject(new Error(`GET /health answered ${res.statusCode}`))));
    });
    req.once('error', reject);
    req.end();
  });
}

/** Runs `measure` for A and B alternately (which goes first alternates too), `rounds` times each. */
async function interleaved(rounds: number, measure: (which: 0 | 1) => Promise<number>): Promise<[number[], number[]]> {
  const samples: [number[], number[]] = [[], []];
  for (let i = 0; i < rounds; i++) {
    const order: Array<0 | 1> = i % 2 === 0 ? [0, 1] : [1, 0];
    for (const which of order) samples[which].push(await measure(which));
  }
  return samples;
}

/** What the agent counted: its runtime calls by operation (every outcome) and the tunnels it was asked for. */
interface AgentCounts {
  calls: Map<string, number>;
  tunnels: number;
}

/** One scrape of the agent's metrics listener. */
async function agentCounts(metricsUrl: string): Promise<AgentCounts> {
  const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(10_000) });
  if (!response.ok) throw new Error(`GET ${metricsUrl} answered ${response.status}`);
  const calls = new Map<string, number>();
  let tunnels = Number.NaN;
  for (const line of (await response.text()).split('\n')) {
    const call = /^tidepool_agent_engine_call_duration_seconds_count\{operation="([^"]+)",outcome="[^"]+"\} ([0-9.e+]+)$/.exec(line);
    if (call) calls.set(call[1]!, (calls.get(call[1]!) ?? 0) + Number(call[2]));
    const opened = /^tidepool_agent_tunnel_streams_total ([0-9.e+]+)$/.exec(line);
    if (opened) tunnels = Number(opened[1]);
  }
  if (Number.isNaN(tunnels)) throw new Error(`${metricsUrl} has no tidepool_agent_tunnel_streams_total (an agent older than this bench)`);
  return { calls, tunnels };
}

/** `after - before`, per operation. */
function countsBetween(before: AgentCounts, after: AgentCounts): AgentCounts {
  const calls = new Map<string, number>();
  for (const [operation, count] of after.calls) {
    const delta = count - (before.calls.get(operation) ?? 0);
    if (delta > 0) calls.set(operation, delta);
  }
  return { calls, tunnels: after.tunnels - before.tunnels };
}

async function setStatus(platform: TestPlatform, nodeId: string, status: 'ready' | 'draining'): Promise<void> {
  const answer = await api(platform, 'POST', `/nodes/${nodeId}`, { status }, platform.adminKey);
  if (answer.status !== 204) throw new Error(`POST /nodes/${nodeId} ${status}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

/** A sandbox placed on `nodeId`: every other node drained for the create, undrained after. */
async function sandboxOn(platform: TestPlatform, nodeId: string, others: string[]): Promise<Sandbox> {
  for (const other of others) await setStatus(platform, other, 'draining');
  try {
    const sandbox = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 1_800_000 });
    const placed = (await api(platform, 'GET', `/sandboxes/${sandbox.sandboxId}`)).body.clientID;
    if (placed !== nodeId) throw new Error(`the sandbox landed on ${placed}, not ${nodeId}`);
    return sandbox;
  } finally {
    for (const other of others) await setStatus(platform, other, 'ready');
  }
}

export async function benchNodeHop(log: (message: string) => void): Promise<Row[]> {
  if (process.getuid?.() !== 0) {
    log('node-hop: skipped (the local cluster needs root)');
    return [{ metric: 'node-hop section', tidepool: 'skipped: needs root', baseline: '', target: '', verdict: 'n/a' }];
  }
  const dir = mkdtempSync(join(tmpdir(), 'tp-node-hop-bench-'));
  const name = `h${process.pid % 10_000_000}`;
  let state: ClusterState | undefined;
  let platform: TestPlatform | undefined;
  let probe: RemoteNode | undefined;
  let beating: NodeJS.Timeout | undefined;
  let stopped = false;
  const made: Sandbox[] = [];
  const client = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    log(`node-hop: up 1 node (load ${load()})`);
    state = await upCluster({ name, slot: await freeClusterSlot(), dir, nodes: 1, images: [BASE_IMAGE], onProgress: (m) => log(`node-hop: ${m}`) });
    const node = state.nodes[0]!;
    const tls = state.tls!;
    probe = connectRemoteNode({ nodeId: node.id, url: node.agentUrl!, tls: { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) } });
    platform = await startTestPlatform({ logLevel: 'warn', nodeId: EMBEDDED, nodeLostAfterSeconds: 30, clusterClientCert: tls.cert, clusterClientKey: tls.key, clusterCa: tls.ca });
    const { store, set } = platform.nodes;
    await store.register({ nodeId: node.id, url: node.agentUrl!, version: 'agent', capacity: await probe.capacity() });
    const beat = async (): Promise<void> => {
      await Promise.resolve(probe!.capacity()).then((capacity) => store.heartbeat(node.id, capacity)).catch(() => undefined);
      if (!stopped) beating = setTimeout(() => void beat(), 2_000);
    };
    void beat();
    const deadline = Date.now() + 120_000;
    while (!(set.has(node.id) && set.status(node.id) === 'ready')) {
      if (Date.now() > deadline) throw new Error('the API did not take in the agent\'s node within 120 s');
      await new Promise((r) => setTimeout(r, 250));
    }
    const metricsUrl = `http://${node.address}:${NODE_METRICS_PORT}/metrics`;
    const creates = await createToFirstCommand(platform, EMBEDDED, node.id, metricsUrl, log);
    const local = await sandboxOn(platform, EMBEDDED, [node.id]);
    made.push(local);
    const remote = await sandboxOn(platform, node.id, [EMBEDDED]);
    made.push(remote);
    const pair = [local, remote] as const;
    const url = new URL(platform.url);
    // Warm-up: both paths' first connections, tunnels and envd's first answers.
    await interleaved(50, (which) => healthThroughProxy(url, client, pair[which].sandboxId));
    await interleaved(10, async (which) => (await pair[which].commands.run('true'), 0));

    const before = load();
    log(`node-hop: ${REQUESTS} × GET /health per node, interleaved (load ${before})`);
    const health = await interleaved(REQUESTS, (which) => healthThroughProxy(url, client, pair[which].sandboxId));
    log(`node-hop: ${COMMANDS} × commands.run('true') per node, interleaved`);
    const commands = await interleaved(COMMANDS, async (which) => {
      const start = now();
      await pair[which].commands.run('true');
      return now() - start;
    });
    const after = load();
    const added = (samples: [number[], number[]]): number => percentile(samples[1], 50) - percentile(samples[0], 50);
    const both = (samples: number[]): string => `${ms(percentile(samples, 50))} / ${ms(percentile(samples, 99))}`;
    log(`node-hop: /health added p50 ${ms(added(health))}, commands.run added p50 ${ms(added(commands))}; load ${before} → ${after}`);
    return [
      ...creates,
      { metric: `node hop: envd GET /health via the proxy p50 / p99 (n=${REQUESTS} each, interleaved)`, tidepool: `${both(health[1])} on the agent`, baseline: `${both(health[0])} embedded`, target: '', verdict: 'info' },
      { metric: 'node hop: added p50 (GET /health)', tidepool: ms(added(health)), baseline: '', target: '≤ 1 ms', verdict: added(health) <= 1 ? 'PASS' : 'FAIL' },
      { metric: `node hop: SDK commands.run('true') p50 / p99 (n=${COMMANDS} each, interleaved)`, tidepool: `${both(commands[1])} on the agent`, baseline: `${both(commands[0])} embedded`, target: '', verdict: 'info' },
      { metric: "node hop: added p50 (commands.run('true'))", tidepool: ms(added(commands)), baseline: '', target: '≤ 1 ms', verdict: added(commands) <= 1 ? 'PASS' : 'FAIL' },
      { metric: 'node hop: load average (1/5/15 min) before → after', tidepool: `${before} → ${after}`, baseline: '', target: '', verdict: 'info' },
    ];
  } finally {
    stopped = true;
    clearTimeout(beating);
    client.destroy();
    await Promise.all(made.map((s) => s.kill().catch(() => undefined)));
    probe?.close();
    await platform?.dispose();
    if (state) await downCluster({ name, dir }).catch((error: unknown) => log(`node-hop: down failed: ${String(error)}`));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * CREATES creates per node, interleaved (which node goes first alternates): create→first command on each, the agent's
 * counts while each remote `Sandbox.create` ran, and the rows that say so.
 */
async function createToFirstCommand(platform: TestPlatform, embedded: string, remote: string, metricsUrl: string, log: (message: string) => void): Promise<Row[]> {
  const nodes = [embedded, remote] as const;
  const samples: [number[], number[]] = [[], []];
  const counted: AgentCounts[] = [];
  log(`node-hop: ${CREATES} creates → first command per node, interleaved (load ${load()})`);
  for (let i = 0; i < CREATES; i++) {
    const order: Array<0 | 1> = i % 2 === 0 ? [0, 1] : [1, 0];
    for (const which of order) {
      const other = nodes[1 - which]!;
      await setStatus(platform, other, 'draining');
      let sandbox: Sandbox | undefined;
      try {
        const before = which === 1 ? await agentCounts(metricsUrl) : undefined;
        const started = now();
        sandbox = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 600_000 });
        const created = now() - started;
        if (before) counted.push(countsBetween(before, await agentCounts(metricsUrl)));
        const commandStarted = now();
        const result = await sandbox.commands.run('true');
        const command = now() - commandStarted;
        if (result.exitCode !== 0) throw new Error(`commands.run('true') exited ${result.exitCode}`);
        const placed = (await api(platform, 'GET', `/sandboxes/${sandbox.sandboxId}`)).body.clientID;
        if (placed !== nodes[which]) throw new Error(`the sandbox landed on ${placed}, not ${nodes[which]}`);
        samples[which].push(created + command);
      } finally {
        await sandbox?.kill().catch(() => undefined);
        await setStatus(platform, other, 'ready');
      }
    }
  }
  const both = (values: number[]): string => `${ms(percentile(values, 50))} / ${ms(percentile(values, 95))}`;
  const ratio = (p: number): string => (percentile(samples[1], p) / percentile(samples[0], p)).toFixed(2);
  const mean = (values: number[]): number => values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length);
  const operations = [...new Set(counted.flatMap((c) => [...c.calls.keys()]))].sort();
  const perOperation = operations.map((op) => `${op} ${mean(counted.map((c) => c.calls.get(op) ?? 0)).toFixed(2)}`).join(', ');
  const calls = mean(counted.map((c) => [...c.calls.values()].reduce((sum, v) => sum + v, 0)));
  const tunnels = mean(counted.map((c) => c.tunnels));
  log(`node-hop: create→first command p50 agent/embedded ${ratio(50)}×; per remote create ${calls.toFixed(2)} calls (${perOperation}), ${tunnels.toFixed(2)} tunnels`);
  return [
    { metric: `node hop: create→first command p50 / p95 (n=${CREATES} each, interleaved)`, tidepool: `${both(samples[1])} on the agent`, baseline: `${both(samples[0])} embedded`, target: '', verdict: 'info' },
    { metric: 'node hop: create→first command agent / embedded (p50, p95)', tidepool: `${ratio(50)}×, ${ratio(95)}×`, baseline: '1× (embedded, same run)', target: '', verdict: 'info' },
    { metric: 'node hop: node-channel runtime calls per remote create (agent metrics)', tidepool: `${calls.toFixed(2)} (${perOperation})`, baseline: '', target: '', verdict: 'info' },
    { metric: 'node hop: tunnels opened per remote create (envd probes, /health, /init; agent metrics)', tidepool: tunnels.toFixed(2), baseline: '', target: '', verdict: 'info' },
  ];
}
