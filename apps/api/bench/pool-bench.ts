/**
 * The warm pool, measured with the real e2b SDK beside `docker run -d → envd healthy` of the same image in
 * the same run:
 *
 *   pool serial     Sandbox.create → first commands.run('true'), one at a time, each from an idle full pool
 *   cold serial     the same on a platform without a pool
 *   pool c=N        N creates at once from a full pool of N, for each N in BENCH_POOL_CONCURRENCY (20,50): p50/p99,
 *                   success, claims/s, beside N × docker run → healthy started at once; the N clients run in their
 *                   own process (pool-burst-client.ts), not on the API's event loop
 *
 * Sizes: BENCH_SERIAL (30), BENCH_POOL_CONCURRENCY (20,50; the first size also serves the serial runs).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import { type RunningPlatform, startPlatform } from '../src/server/platform.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { dockerRunBaseline, dockerRunConcurrent } from './docker-baseline.ts';

const SERIAL = Number(process.env.BENCH_SERIAL ?? 30);
const SIZES = (process.env.BENCH_POOL_CONCURRENCY ?? '20,50').split(',').map((s) => Math.max(1, Number(s.trim())));

type Log = (message: string) => void;

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function platformWith(warmPool: Record<string, number>): Promise<{ platform: RunningPlatform; close(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-pool-'));
  const platform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'warn', warmPool, warmPoolAdaptive: false });
  return {
    platform,
    async close() {
      await platform.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface BurstResult {
  latencies: number[];
  /** When each create returned, from the start of the burst (ms). */
  creates: number[];
  failures: string[];
  sandboxIds: string[];
  /** CPU the client process (the SDK) used during the burst, ms. */
  clientCpuMs: number;
}

/**
 * How many client processes share a burst (BENCH_BURST_CLIENTS, default 2). With one, the burst's SDK calls all
 * queue on one event loop (~12 ms of SDK CPU per create→command here), so that loop alone bounds a 20-burst's p99
 * near 250 ms whatever the platform does; real bursts come from many clients.
 */
export const BURST_CLIENTS = Math.max(1, Number(process.env.BENCH_BURST_CLIENTS ?? 2));

/** Where burst clients create their sandboxes. */
export type BurstTarget = Pick<RunningPlatform, 'url' | 'apiKey'>;

/** Starts one client process for `count` creates; resolves once it is warmed and waiting for `go`. */
async function startBurstClient(platform: BurstTarget, count: number) {
  const here = dirname(fileURLToPath(import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'pool-burst-client.ts')], {
    cwd: join(here, '..'),
    env: { ...process.env, BURST_URL: platform.url, BURST_API_KEY: platform.apiKey, BURST_COUNT: String(count) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done) throw new Error('the burst client ended without a result');
    return line.value as string;
  };
  try {
    while ((await next()) !== 'ready');
  } catch (error) {
    child.kill();
    throw error;
  }
  return {
    go: async (): Promise<BurstResult> => {
      try {
        child.stdin!.write('go\n');
        for (;;) {
          const line = await next();
          if (line.startsWith('{')) return JSON.parse(line) as BurstResult;
        }
      } finally {
        child.kill();
      }
    },
    kill: () => child.kill(),
  };
}

/**
 * Runs a burst of `count` creates from BURST_CLIENTS client processes: all started and warmed first, then told to
 * go at once when `settled` resolves. Latencies are merged; `creates` are each from its own client's start.
 */
export async function burstFromClient(platform: BurstTarget, count: number, settled: () => Promise<void>): Promise<BurstResult> {
  const processes = Math.min(BURST_CLIENTS, count);
  const shares = Array.from({ length: processes }, (_, i) => Math.floor(count / processes) + (i < count % processes ? 1 : 0));
  const clients: Awaited<ReturnType<typeof startBurstClient>>[] = [];
  try {
    for (const share of shares) clients.push(await startBurstClient(platform, share));
    await settled();
  } catch (error) {
    for (const client of clients) client.kill();
    throw error;
  }
  const results = await Promise.all(clients.map((client) => client.go()));
  return {
    latencies: results.flatMap((r) => r.latencies),
    creates: results.flatMap((r) => r.creates).sort((a, b) => a - b),
    failures: results.flatMap((r) => r.failures),
    sandboxIds: results.flatMap((r) => r.sandboxIds),
    clientCpuMs: results.reduce((sum, r) => sum + r.clientCpuMs, 0),
  };
}

const sdkOf = (p: RunningPlatform) => ({ apiKey: p.apiKey, apiUrl: p.url, sandboxUrl: p.url, requestTimeoutMs: 60_000 });

/** Create → first command, serially; `before` runs (untimed) ahead of each one. */
async function serialCreates(platform: RunningPlatform, count: number, before: () => Promise<void>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i += 1) {
    await before();
    const start = now();
    const sbx = await Sandbox.create('base', sdkOf(platform));
    await sbx.commands.run('true');
    samples.push(now() - start);
    await sbx.kill();
  }
  return samples;
}

interface Baseline {
  healthyP50: number;
  healthyP99: number;
  image: string;
  network: string;
}

/** One platform with a full pool of `size`: serial creates (when `serial`), then a burst of `size` at once. */
async function poolRuns(size: number, serial: boolean, base: Baseline, log: Log): Promise<Row[]> {
  const rows: Row[] = [];
  const baseline = `${ms(base.healthyP50)} run→envd healthy p50`;
  log(`pool of ${size}: filling`);
  const pooled = await platformWith({ base: size });
  const pool = pooled.platform.warmPool!;
  const idleAndFull = (): boolean => pool.stats().ready === size && pool.stats().warming === 0;
  try {
    await until(idleAndFull, 10 * 60_000, 'the pool to fill');
    // Warm-up: the first create pays for lazy initialisation on both sides.
    await serialCreates(pooled.platform, 1, async () => undefined);

    if (serial) {
      log(`pool: create→first command serial ×${SERIAL}`);
      const claimsBefore = pool.stats().claimedTotal;
      const samples = await serialCreates(pooled.platform, SERIAL, () => until(idleAndFull, 120_000, 'the pool to refill'));
      const claimed = pool.stats().claimedTotal - claimsBefore;
      const p50 = percentile(samples, 50);
      const target = Math.min(60, 0.1 * base.healthyP50);
      rows.push({
        metric: `pool: create→first command p50 (serial, n=${SERIAL}, ${claimed} claimed)`,
        tidepool: ms(p50),
        baseline,
        target: `≤ 60 ms and ≤ 0.1× baseline (${ms(0.1 * base.healthyP50)})`,
        verdict: p50 <= target && claimed === SERIAL ? 'PASS' : 'FAIL',
      });
      rows.push({ metric: 'pool: create→first command p99 (serial)', tidepool: ms(percentile(samples, 99)), baseline: `${ms(base.healthyP99)} run→healthy p99`, target: '', verdict: 'info' });
    }

    log(`pool: ${size} creates at once from a pool of ${size}`);
    let burstClaimsBefore = 0;
    const { latencies, creates, failures, sandboxIds, clientCpuMs } = await burstFromClient(pooled.platform, size, async () => {
      await until(idleAndFull, 10 * 60_000, 'the pool to refill');
      burstClaimsBefore = pool.stats().claimedTotal;
    });
    const burstClaims = pool.stats().claimedTotal - burstClaimsBefore;
    const claimWindow = Math.max(...creates) / 1000;
    await Promise.all(sandboxIds.map((id) => pooled.platform.lifecycle.kill(id).catch(() => undefined)));
    if (failures.length > 0) log(`pool burst failures: ${[...new Set(failures)].slice(0, 5).join(' | ')}`);
    log(`docker run -d baseline: ${size} at once`);
    const docker = await dockerRunConcurrent(base.image, base.network, size);
    const dockerAtOnce = `${ms(percentile(docker, 50))} / ${ms(percentile(docker, 99))} ${size}× docker run→healthy at once`;
    const burstP99 = percentile(latencies, 99);
    const gated = size === 20;
    rows.push({
      metric: `pool: create→first command p50 / p99 (c=${size}, pool of ${size}, ${Math.min(BURST_CLIENTS, size)} SDK processes)`,
      tidepool: `${ms(percentile(latencies, 50))} / ${ms(burstP99)}`,
      baseline: dockerAtOnce,
      target: gated ? 'p99 ≤ 300 ms' : '',
      verdict: gated ? (burstP99 <= 300 ? 'PASS' : 'FAIL') : 'info',
    });
    rows.push({
      metric: `pool: success at c=${size}`,
      tidepool: `${latencies.length}/${size} (${burstClaims} claimed)`,
      baseline: '',
      target: '100%',
      verdict: latencies.length === size ? 'PASS' : 'FAIL',
    });
    rows.push({ metric: `pool: SDK client CPU during the c=${size} burst (${Math.min(BURST_CLIENTS, size)} client processes, summed)`, tidepool: '', baseline: `${ms(clientCpuMs)} (${ms(clientCpuMs / size)} per create→command)`, target: '', verdict: 'info' });
    rows.push({ metric: `pool: claims/s (c=${size} burst)`, tidepool: `${(burstClaims / claimWindow).toFixed(1)} /s`, baseline: `${((size / Math.max(...docker)) * 1000).toFixed(1)} /s docker run→healthy, ${size} at once`, target: '', verdict: 'info' });
  } finally {
    await pooled.close();
  }
  return rows;
}

export async function benchPool(image: string, network: string, log: Log): Promise<Row[]> {
  const rows: Row[] = [];
  log(`docker run -d baseline ×${Math.min(SERIAL, 20)} (pool section)`);
  const runs = await dockerRunBaseline(image, network, Math.min(SERIAL, 20));
  const healthyP50 = percentile(runs.map((r) => r.healthyMs), 50);
  const healthyP99 = percentile(runs.map((r) => r.healthyMs), 99);
  for (const [index, size] of SIZES.entries()) rows.push(...(await poolRuns(size, index === 0, { healthyP50, healthyP99, image, network }, log)));

  const coldCount = Math.min(SERIAL, 15);
  log(`cold (no pool): create→first command serial ×${coldCount}`);
  const cold = await platformWith({});
  try {
    await serialCreates(cold.platform, 1, async () => undefined);
    const serial = await serialCreates(cold.platform, coldCount, async () => undefined);
    rows.push({
      metric: `cold (no pool): create→first command p50 / p99 (serial, n=${coldCount})`,
      tidepool: `${ms(percentile(serial, 50))} / ${ms(percentile(serial, 99))}`,
      baseline: `${ms(healthyP50)} / ${ms(healthyP99)} run→healthy`,
      target: '',
      verdict: 'info',
    });
  } finally {
    await cold.close();
  }
  return rows;
}
