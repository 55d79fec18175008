/**
 * The adaptive warm pool with its default settings (floor base=2, 10 s period, 4 refills at once), measured with
 * the real e2b SDK: a burst of N creates → first command at once finds only the floor ready (most start cold),
 * the pool then grows to the burst; a second burst of N one minute after the first ended is served from it (target
 * p99 ≤ 300 ms). Prints both bursts'
 * p50/p99 and claims, and how long the pool took to grow. N is BENCH_POOL_CONCURRENCY's first size (20).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunningPlatform, startPlatform } from '../src/server/platform.ts';
import { ms, percentile, type Row } from './bench-stats.ts';
import { BURST_CLIENTS, type BurstResult, burstFromClient } from './pool-bench.ts';

const SIZE = Math.max(1, Number((process.env.BENCH_POOL_CONCURRENCY ?? '20').split(',')[0].trim()));
/** The second burst starts this long after the first one ended (issue 20: "one minute after"). */
const SECOND_AFTER_MS = 60_000;

type Log = (message: string) => void;

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function burstRows(label: string, result: BurstResult, claims: number, p99Target?: number): Row[] {
  const { latencies, failures } = result;
  const p99 = percentile(latencies, 99);
  return [
    {
      metric: `adaptive pool, ${label}: create→first command p50 / p99 (c=${SIZE}, ${Math.min(BURST_CLIENTS, SIZE)} SDK processes)`,
      tidepool: `${ms(percentile(latencies, 50))} / ${ms(p99)}`,
      baseline: '',
      target: p99Target === undefined ? '' : `p99 ≤ ${p99Target} ms`,
      verdict: p99Target === undefined ? 'info' : p99 <= p99Target ? 'PASS' : 'FAIL',
    },
    { metric: `adaptive pool, ${label}: success, served from the pool`, tidepool: `${latencies.length}/${SIZE}, ${claims} claimed`, baseline: failures.slice(0, 1).join(''), target: '100%', verdict: latencies.length === SIZE ? 'PASS' : 'FAIL' },
  ];
}

export async function benchPoolAdaptive(log: Log): Promise<Row[]> {
  const rows: Row[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-adaptive-'));
  const platform: RunningPlatform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'warn', warmPool: {}, warmPoolAdaptive: true });
  const pool = platform.warmPool!;
  const idle = (ready: number) => () => pool.stats().ready >= ready && pool.stats().warming === 0;
  try {
    log(`adaptive pool: waiting for the floor`);
    await until(idle(2), 5 * 60_000, 'the floor');
    const kill = (ids: string[]) => Promise.all(ids.map((id) => platform.lifecycle.kill(id).catch(() => undefined)));

    log(`adaptive pool: first burst of ${SIZE}`);
    let claimsBefore = 0;
    const first = await burstFromClient(platform, SIZE, async () => {
      await until(idle(2), 5 * 60_000, 'the floor');
      claimsBefore = pool.stats().claimedTotal;
    });
    const firstClaims = pool.stats().claimedTotal - claimsBefore;
    const burstEnded = Date.now();
    await kill(first.sandboxIds);
    rows.push(...burstRows('first burst (pool at its floor)', first, firstClaims));

    log(`adaptive pool: growing to ${SIZE}; the second burst goes ${SECOND_AFTER_MS / 1000} s after the first ended`);
    const grown = await until(idle(SIZE), burstEnded + SECOND_AFTER_MS - Date.now(), 'the pool to grow').then(() => true, () => false);
    rows.push({
      metric: `adaptive pool: grown to ${SIZE} ready after the first burst`,
      tidepool: grown ? `${((Date.now() - burstEnded) / 1000).toFixed(1)} s` : `not within ${SECOND_AFTER_MS / 1000} s (${pool.stats().ready} ready)`,
      baseline: '',
      target: `≤ ${SECOND_AFTER_MS / 1000} s`,
      verdict: grown ? 'PASS' : 'FAIL',
    });

    log(`adaptive pool: second burst of ${SIZE}`);
    const second = await burstFromClient(platform, SIZE, async () => {
      await new Promise((r) => setTimeout(r, Math.max(0, burstEnded + SECOND_AFTER_MS - Date.now())));
      claimsBefore = pool.stats().claimedTotal;
    });
    const secondClaims = pool.stats().claimedTotal - claimsBefore;
    await kill(second.sandboxIds);
    rows.push(...burstRows(`second burst, ${SECOND_AFTER_MS / 1000} s after the first`, second, secondClaims, 300));
    rows.push({ metric: 'adaptive pool: SDK client CPU in the second burst', tidepool: '', baseline: `${ms(second.clientCpuMs)}`, target: '', verdict: 'info' });
  } finally {
    await platform.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return rows;
}
