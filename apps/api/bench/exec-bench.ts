/**
 * Exec latency through the platform: `commands.run('true')` on one running sandbox, through the API's proxy
 * (the SDK's path), BENCH_EXEC times (200) after 20 warm-up runs. Beside it, in the same run: `docker exec
 * <that container> bash -l -c true`, and `bash -l -c true` started by a shell inside the sandbox as `user` (the
 * floor: the SDK runs every command as `bash -l -c`, and that is what envd starts).
 */
import { Sandbox } from 'e2b';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { containerShellBaseline, docker, dockerExecBaseline } from './docker-baseline.ts';

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
    const id = containerId.split('\n')[0]!;
    log(`exec baselines: docker exec ×${baselineRuns}, bash -l -c true in the sandbox ×${RUNS}`);
    const dockerExec = await dockerExecBaseline(id, baselineRuns);
    const shell = await containerShellBaseline(id, RUNS);
    const p50 = percentile(samples, 50);
    return [
      {
        metric: `exec: commands.run('true') p50 / p99 via proxy (n=${RUNS})`,
        tidepool: `${ms(p50)} / ${ms(percentile(samples, 99))}`,
        baseline: `${ms(percentile(dockerExec, 50))} docker exec; ${ms(percentile(shell, 50))} bash -l -c true run in the sandbox`,
        target: `p50 ≤ ${TARGET_MS} ms`,
        verdict: p50 <= TARGET_MS ? 'PASS' : 'FAIL',
      },
    ];
  } finally {
    await sbx.kill().catch(() => undefined);
  }
}
