/**
 * Exec latency through the platform: `commands.run('true')` on one running sandbox, through the API's proxy
 * (the SDK's path), BENCH_EXEC times (200) after 20 warm-up runs. The API runs as its own process (as
 * `npm start` runs it), so the SDK's CPU and the API's do not queue on one event loop. Beside it, in the same
 * run:
 *   SDK floor   the same call against a server that answers at once (instant-start-server.ts, nothing
 *               spawned), interleaved with the real calls: what the client alone costs on this machine
 *   docker exec <that container> bash -l -c true
 *   bash -l -c true started by a shell inside the sandbox as `user` (the SDK runs every command as
 *               `bash -l -c`, and that is what envd starts)
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import { startApiProcess } from './api-process.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { containerShellBaseline, docker, dockerExecBaseline } from './docker-baseline.ts';

const RUNS = Number(process.env.BENCH_EXEC ?? 200);
const TARGET_MS = 5;

/** The instant server in its own process; resolves with its URL and a stop function. */
async function startInstantServer(): Promise<{ url: string; stop(): void }> {
  const here = dirname(fileURLToPath(import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'instant-start-server.ts')], { cwd: join(here, '..'), stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const port = /^listening (\d+)$/.exec(line)?.[1];
    if (port) return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
  }
  throw new Error('the instant Start server exited before it listened');
}

export async function benchExec(log: (m: string) => void): Promise<Row[]> {
  log(`exec: commands.run('true') ×${RUNS} through the proxy of an API in its own process, interleaved with the SDK floor`);
  const api = await startApiProcess({});
  const instant = await startInstantServer();
  try {
    const sbx = await Sandbox.create({ apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 60_000 });
    // debug: the SDK talks to sandboxUrl as to envd, with no platform call.
    const floorSbx = await Sandbox.create({ debug: true, sandboxUrl: instant.url, apiKey: 'floor' });
    for (let i = 0; i < 20; i += 1) {
      await sbx.commands.run('true');
      await floorSbx.commands.run('true');
    }
    const samples: number[] = [];
    const floor: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      let start = now();
      await sbx.commands.run('true');
      samples.push(now() - start);
      start = now();
      await floorSbx.commands.run('true');
      floor.push(now() - start);
    }
    const id = (await docker(['ps', '-q', '--no-trunc', '--filter', `label=dev.tidepool.sandbox-id=${sbx.sandboxId}`])).split('\n')[0]!;
    const baselineRuns = Math.min(RUNS, 50);
    log(`exec baselines: docker exec ×${baselineRuns}, bash -l -c true in the sandbox ×${RUNS}`);
    const dockerExec = await dockerExecBaseline(id, baselineRuns);
    const shell = await containerShellBaseline(id, RUNS);
    await sbx.kill();
    const p50 = percentile(samples, 50);
    return [
      {
        metric: `exec: commands.run('true') p50 / p99 via proxy (n=${RUNS})`,
        tidepool: `${ms(p50)} / ${ms(percentile(samples, 99))}`,
        baseline: `${ms(percentile(dockerExec, 50))} docker exec; ${ms(percentile(shell, 50))} bash -l -c true run in the sandbox; ${ms(percentile(floor, 50))} SDK floor`,
        target: `p50 ≤ ${TARGET_MS} ms`,
        verdict: p50 <= TARGET_MS ? 'PASS' : 'FAIL',
      },
      {
        metric: "exec: SDK floor p50 (commands.run against a server answering at once)",
        tidepool: '',
        baseline: `${ms(percentile(floor, 50))} (the platform adds ${ms(p50 - percentile(floor, 50))})`,
        target: '',
        verdict: 'info',
      },
    ];
  } finally {
    instant.stop();
    await api.stop();
  }
}
