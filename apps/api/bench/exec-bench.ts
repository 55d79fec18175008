/**
 * Exec latency through the platform: `commands.run('true')` on one running sandbox, through the API's proxy
 * (the SDK's path), BENCH_EXEC times (200) after 20 warm-up runs. Beside it, in the same run: `docker exec
 * <that container> bash -l -c true`, and `bash -l -c true` spawned on this machine (the floor: the SDK runs
 * every command as `bash -l -c`).
 */
import { Sandbox } from 'e2b';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { docker, dockerExecBaseline, localShellBaseline } from './docker-baseline.ts';

const RUNS = Number(process.env.BENCH_EXEC ?? 200);
const TARGET_MS = 5;

type SdkOptions = { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number };

export async function benchExec(opts: SdkOptions, log: (m: string) => void): Promise<Row[]> {
  log(`exec: commands.run('true') ×${RUNS} through the proxy`);
  const sbx = await Sandbox.create(opts);
  try {
    for (let i = 0; i < 20; i += 1) await sbx.commands.run('true');
    const samples: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      const start = now();
      await sbx.commands.run('true');
      samples.push(now() - start);
    }
    const containerId = await docker(['ps', '-q', '--no-trunc', '--filter', `label=dev.tidepool.sandbox-id=${sbx.sandboxId}`]);
    const baselineRuns = Math.min(RUNS, 50);
    log(`exec baselines: docker exec ×${baselineRuns}, local bash -l -c true ×${RUNS}`);
    const dockerExec = await dockerExecBaseline(containerId.split('\n')[0]!, baselineRuns);
    const local = await localShellBaseline(RUNS);
    const p50 = percentile(samples, 50);
    return [
      {
        metric: `exec: commands.run('true') p50 / p99 via proxy (n=${RUNS})`,
        tidepool: `${ms(p50)} / ${ms(percentile(samples, 99))}`,
        baseline: `${ms(percentile(dockerExec, 50))} docker exec; ${ms(percentile(local, 50))} local bash -l -c true`,
        target: `p50 ≤ ${TARGET_MS} ms`,
        verdict: p50 <= TARGET_MS ? 'PASS' : 'FAIL',
      },
    ];
  } finally {
    await sbx.kill().catch(() => undefined);
  }
}
