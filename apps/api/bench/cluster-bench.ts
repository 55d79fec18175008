/**
 * `BENCH_SECTIONS=cluster`: creates through the e2b SDK on a three-node local cluster against the same cluster with
 * one node, in the same run (issue 17's performance figure). One `upCluster` (3 node engines with their agents,
 * the cluster's PostgreSQL, one API replica); the one-node phase drains node2 and node3 in the node table
 * (`setClusterNodePlacement`), the three-node phase puts them back. Each phase is a burst of BENCH_CLUSTER_CREATES
 * (50) `Sandbox.create` → first `commands.run('true')` at concurrency BENCH_CLUSTER_CONCURRENCY (50), all killed
 * after. A create answered 429 (every node full: placement counts each create in flight against the memory the
 * node has available) is retried after the 1 s its Retry-After asks, as a client should; its time includes the
 * waits and the 429s are counted. Printed: creates/s over the burst, create→first command p50/p99, successes, where the sandboxes landed,
 * and the load average around each phase (the three "nodes" share this machine's cores: the figure shows what
 * spreading costs or gains here, not what three machines would do). Root only.
 */
import { cpSync, lstatSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { RateLimitError, Sandbox } from 'e2b';
import { BASE_IMAGE, downCluster, freeClusterSlot, setClusterNodePlacement, upCluster, type ClusterState } from '@tidepool/testkit';
import { atConcurrency, ms, now, percentile, type Row } from './bench-stats.ts';

const CREATES = Number(process.env.BENCH_CLUSTER_CREATES ?? 50);
const CONCURRENCY = Number(process.env.BENCH_CLUSTER_CONCURRENCY ?? 50);
const NODES = ['node1', 'node2', 'node3'];
const LOST_AFTER_SECONDS = 30;
/** The replica's node sweep: min(5 s, lost deadline / 3). */
const SWEEP_MS = Math.min(5_000, (LOST_AFTER_SECONDS * 1000) / 3);

interface Burst {
  seconds: number;
  samples: number[];
  ok: number;
  refusals: number;
  landed: Map<string, number>;
  load: string;
}

const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' / ');

async function nodesSeen(state: ClusterState): Promise<Map<string, string>> {
  const res = await fetch(`${state.apis![0].url}/nodes`, { headers: { 'x-api-key': state.adminKey! } });
  const nodes = (await res.json()) as { nodeID: string; status: string }[];
  return new Map(nodes.map((n) => [n.nodeID, n.status]));
}

/** Sets node2/node3 draining or ready and waits until the replica's placement sees it. */
async function useNodes(state: ClusterState, count: 1 | 3): Promise<void> {
  const want = count === 1 ? 'draining' : 'ready';
  for (const id of NODES.slice(1)) {
    if ((await nodesSeen(state)).get(id) !== want) await setClusterNodePlacement(state.dir, id, want);
  }
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const seen = await nodesSeen(state);
    if (NODES.slice(1).every((id) => seen.get(id) === want) && seen.get('node1') === 'ready') {
      // GET /nodes shows the table; placement uses what the replica took in at its last sweep (every 5 s here).
      await new Promise((r) => setTimeout(r, SWEEP_MS + 1_000));
      return;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the replica does not see node2/node3 ${want} within 60 s`);
}

async function burst(state: ClusterState, log: (message: string) => void, label: string): Promise<Burst> {
  const api = state.apis![0].url;
  const opts = { apiKey: state.apiKey!, apiUrl: api, sandboxUrl: api, requestTimeoutMs: 300_000 };
  const samples: number[] = [];
  const made: Sandbox[] = [];
  const landed = new Map<string, number>();
  let refusals = 0;
  const before = load();
  const begin = now();
  await atConcurrency(CREATES, CONCURRENCY, async () => {
    const start = now();
    try {
      let sandbox: Sandbox | undefined;
      while (!sandbox) {
        try {
          sandbox = await Sandbox.create('base', { ...opts, timeoutMs: 600_000 });
        } catch (error) {
          if (!(error instanceof RateLimitError) || now() - start > 300_000) throw error;
          refusals += 1;
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
      made.push(sandbox);
      await sandbox.commands.run('true');
      samples.push(now() - start);
    } catch (error) {
      log(`${label}: a create failed: ${(error as Error).message}`);
    }
  });
  const seconds = (now() - begin) / 1000;
  const after = load();
  for (const sandbox of made) {
    const res = await fetch(`${api}/sandboxes/${sandbox.sandboxId}`, { headers: { 'x-api-key': state.apiKey! } });
    const nodeId = ((await res.json()) as { clientID?: string }).clientID ?? '?';
    landed.set(nodeId, (landed.get(nodeId) ?? 0) + 1);
  }
  await atConcurrency(made.length, 10, async (i) => void (await made[i]!.kill().catch(() => undefined)));
  log(`${label}: ${samples.length}/${CREATES} in ${seconds.toFixed(1)} s (${refusals} 429s retried), p50 ${ms(percentile(samples, 50))}; load ${before} → ${after}`);
  return { seconds, samples, ok: samples.length, refusals, landed, load: `${before} → ${after}` };
}

/** Copies the cluster's logs (engines, agents, replicas, PostgreSQL) out before `down` removes them. */
function keepLogs(dir: string, to: string, log: (message: string) => void): void {
  const skipped = new Set(['data', 'exec', 'registry', 'agent-data', 'run', 'tls']);
  const wanted = (path: string): boolean => (lstatSync(path).isDirectory() ? !skipped.has(basename(path)) : path.endsWith('.log'));
  cpSync(dir, to, { recursive: true, filter: wanted });
  log(`cluster: logs kept in ${to}`);
}

export async function benchCluster(log: (message: string) => void): Promise<Row[]> {
  if (process.getuid?.() !== 0) {
    log('cluster: skipped (the local cluster needs root)');
    return [{ metric: 'cluster section', tidepool: 'skipped: needs root', baseline: '', target: '', verdict: 'n/a' }];
  }
  const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-bench-'));
  const name = `b${process.pid % 10_000_000}`;
  log(`cluster: up 3 nodes + PostgreSQL + 1 replica in ${dir} (load ${load()})`);
  try {
    const upStart = now();
    const state = await upCluster({ name, slot: await freeClusterSlot(), dir, nodes: 3, images: [BASE_IMAGE], postgres: true, apis: 1, nodeLostAfterSeconds: LOST_AFTER_SECONDS, onProgress: (m) => log(`cluster: ${m}`) });
    log(`cluster: up in ${((now() - upStart) / 1000).toFixed(0)} s`);
    // Warm-up: one create per node pays for each engine's and the replica's first-use costs.
    const warm = { apiKey: state.apiKey!, apiUrl: state.apis![0].url, sandboxUrl: state.apis![0].url, requestTimeoutMs: 300_000 };
    const first = await Promise.all(NODES.map(() => Sandbox.create('base', { ...warm, timeoutMs: 120_000 })));
    await Promise.all(first.map(async (s) => (await s.commands.run('true'), s.kill())));
    await useNodes(state, 1);
    const one = await burst(state, log, '1 node');
    await useNodes(state, 3);
    const three = await burst(state, log, '3 nodes');
    const where = (b: Burst): string => [...b.landed.entries()].sort().map(([id, n]) => `${id} ${n}`).join(', ');
    return [
      { metric: `cluster creates/s, c=${CONCURRENCY} (n=${CREATES}; SDK, 1 replica)`, tidepool: `${(three.ok / three.seconds).toFixed(2)} /s on 3 nodes`, baseline: `${(one.ok / one.seconds).toFixed(2)} /s on 1 node`, target: '', verdict: 'info' },
      { metric: 'cluster create→first command p50 / p99', tidepool: `${ms(percentile(three.samples, 50))} / ${ms(percentile(three.samples, 99))}`, baseline: `${ms(percentile(one.samples, 50))} / ${ms(percentile(one.samples, 99))} (1 node)`, target: '', verdict: 'info' },
      { metric: 'cluster successes; where they landed', tidepool: `${three.ok}/${CREATES}: ${where(three)}`, baseline: `${one.ok}/${CREATES}: ${where(one)}`, target: '100%', verdict: three.ok === CREATES && one.ok === CREATES ? 'PASS' : 'FAIL' },
      { metric: 'cluster 429s (every node full) retried after 1 s', tidepool: String(three.refusals), baseline: String(one.refusals), target: '', verdict: 'info' },
      { metric: 'load average (1/5/15 min) before → after each burst', tidepool: three.load, baseline: one.load, target: '', verdict: 'info' },
    ];
  } finally {
    if (process.env.BENCH_CLUSTER_LOGS) keepLogs(dir, process.env.BENCH_CLUSTER_LOGS, log);
    await downCluster({ name, dir }).catch((error: unknown) => log(`cluster: down failed: ${String(error)}`));
    rmSync(dir, { recursive: true, force: true });
  }
}
