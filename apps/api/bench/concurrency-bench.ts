/**
 * Cold creates at concurrency c (no warm pool on the bench platform): `n` × (Sandbox.create → first
 * commands.run('true')) with c in flight, for each c in BENCH_CONCURRENCY (20,50); n = max(c, BENCH_CONCURRENT).
 * Beside it, c × (docker run -d → envd /health) started at once in the same run.
 */
import { Sandbox } from 'e2b';
import { atConcurrency, ms, now, percentile, type Row } from './bench-stats.ts';
import { dockerRunConcurrent } from './docker-baseline.ts';

const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? '20,50').split(',').map((s) => Math.max(1, Number(s.trim())));
const CONCURRENT = Number(process.env.BENCH_CONCURRENT ?? 50);

type SdkOptions = { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number };

async function coldAt(opts: SdkOptions, concurrency: number, total: number): Promise<{ latencies: number[]; failures: string[]; wallMs: number }> {
  const latencies: number[] = [];
  const failures: string[] = [];
  const wallStart = now();
  await atConcurrency(total, concurrency, async () => {
    const start = now();
    let sbx: Sandbox | undefined;
    try {
      sbx = await Sandbox.create(opts);
      const result = await sbx.commands.run('true');
      if (result.exitCode !== 0) throw new Error(`exit ${result.exitCode}`);
      latencies.push(now() - start);
    } catch (err) {
      failures.push((err as Error).message);
    } finally {
      await sbx?.kill().catch(() => undefined);
    }
  });
  return { latencies, failures, wallMs: now() - wallStart };
}

export async function benchColdConcurrency(opts: SdkOptions, image: string, network: string, log: (m: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  for (const c of CONCURRENCIES) {
    const total = Math.max(c, CONCURRENT);
    log(`cold: create→first command ×${total} at concurrency ${c}`);
    const { latencies, failures, wallMs } = await coldAt(opts, c, total);
    if (failures.length > 0) log(`cold c=${c} failures: ${[...new Set(failures)].slice(0, 5).join(' | ')}`);
    log(`docker run -d baseline: ${c} at once`);
    const docker = await dockerRunConcurrent(image, network, c);
    rows.push({
      metric: `cold: create→first command p50 / p99 (c=${c}, n=${total})`,
      tidepool: `${ms(percentile(latencies, 50))} / ${ms(percentile(latencies, 99))}`,
      baseline: `${ms(percentile(docker, 50))} / ${ms(percentile(docker, 99))} ${c}× docker run→healthy at once`,
      target: '',
      verdict: 'info',
    });
    rows.push({
      metric: `cold: success at c=${c}`,
      tidepool: `${latencies.length}/${total} (${((latencies.length / wallMs) * 1000).toFixed(1)} sandboxes/s)`,
      baseline: `${((c / Math.max(...docker)) * 1000).toFixed(1)} /s docker`,
      target: '100%',
      verdict: latencies.length === total ? 'PASS' : 'FAIL',
    });
  }
  return rows;
}
