/**
 * The code interpreter, measured with the published `@e2b/code-interpreter` SDK against the API in its own process
 * (as `npm start` runs it) with a warm pool of `code-interpreter-v1` sandboxes (TIDEPOOL_WARM_POOL):
 *
 *   runCode warm      runCode('1+1') in the default Python context of one sandbox, after warm-up runs,
 *                     interleaved with the same-run baseline commands.run('python3 -c "print(1+1)"') (envd
 *                     starting a fresh Python process) so drift on the machine hits both alike
 *   pool → runCode    Sandbox.create() → first runCode('1+1') result, serially, each from a full pool
 *
 * Sizes: BENCH_CI_RUNS (200), BENCH_CI_CREATES (20), BENCH_CI_POOL (2).
 */
import { Sandbox } from '@e2b/code-interpreter';
import { startApiProcess } from './api-process.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';

const RUNS = Number(process.env.BENCH_CI_RUNS ?? 200);
const CREATES = Number(process.env.BENCH_CI_CREATES ?? 20);
const POOL = Math.max(1, Number(process.env.BENCH_CI_POOL ?? 2));
const WARM_TARGET_MS = 15;
const CREATE_TARGET_MS = 150;

type Log = (message: string) => void;

/** Ready pool containers of the platform, from its Prometheus `/metrics`. */
async function poolReady(url: string, apiKey: string): Promise<number> {
  const response = await fetch(`${url}/metrics`, { headers: { 'X-API-Key': apiKey } });
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  const text = await response.text();
  let ready = 0;
  for (const match of text.matchAll(/^tidepool_pool_containers\{[^}]*state="ready"[^}]*\} (\d+)/gm)) ready += Number(match[1]);
  return ready;
}

async function untilPoolFull(url: string, apiKey: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await poolReady(url, apiKey)) < POOL) {
    if (Date.now() > deadline) throw new Error(`the code-interpreter pool did not reach ${POOL} ready within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function expectTwo(text: string | undefined, what: string): void {
  if (text?.trim() !== '2') throw new Error(`${what} gave ${JSON.stringify(text)}, not 2`);
}

export async function benchCodeInterpreter(log: Log): Promise<Row[]> {
  log(`code-interpreter: API in its own process with TIDEPOOL_WARM_POOL=code-interpreter=${POOL}`);
  const api = await startApiProcess({ TIDEPOOL_WARM_POOL: `code-interpreter=${POOL}` });
  const opts = { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 60_000 };
  const rows: Row[] = [];
  try {
    log('code-interpreter: waiting for the pool to fill');
    await untilPoolFull(api.url, api.apiKey, 10 * 60_000);

    // -- create → first runCode from the pool ------------------------------------------------------------------
    const creates: number[] = [];
    for (let i = -1; i < CREATES; i += 1) {
      await untilPoolFull(api.url, api.apiKey, 5 * 60_000);
      const start = now();
      const sbx = await Sandbox.create(opts);
      try {
        const execution = await sbx.runCode('1+1');
        const elapsed = now() - start;
        expectTwo(execution.text, 'runCode after create');
        if (i >= 0) creates.push(elapsed); // the first is a warm-up
      } finally {
        await sbx.kill().catch(() => undefined);
      }
    }
    log(`code-interpreter: create→first runCode ×${CREATES} done`);

    // -- warm runCode beside commands.run(python3 -c) ------------------------------------------------------------
    const sbx = await Sandbox.create({ ...opts, timeoutMs: 600_000 });
    const warm: number[] = [];
    const python: number[] = [];
    try {
      for (let i = 0; i < 20; i += 1) {
        expectTwo((await sbx.runCode('1+1')).text, 'warm-up runCode');
        expectTwo((await sbx.commands.run('python3 -c "print(1+1)"')).stdout, 'warm-up python3 -c');
      }
      log(`code-interpreter: runCode('1+1') ×${RUNS} interleaved with commands.run('python3 -c …')`);
      for (let i = 0; i < RUNS; i += 1) {
        let start = now();
        const execution = await sbx.runCode('1+1');
        warm.push(now() - start);
        expectTwo(execution.text, 'runCode');
        start = now();
        const result = await sbx.commands.run('python3 -c "print(1+1)"');
        python.push(now() - start);
        expectTwo(result.stdout, 'python3 -c');
      }
    } finally {
      await sbx.kill().catch(() => undefined);
    }

    const warmP50 = percentile(warm, 50);
    const createP50 = percentile(creates, 50);
    rows.push({
      metric: `runCode('1+1') warm, p50 / p99 (n=${RUNS})`,
      tidepool: `${ms(warmP50)} / ${ms(percentile(warm, 99))}`,
      baseline: `${ms(percentile(python, 50))} / ${ms(percentile(python, 99))} commands.run('python3 -c "print(1+1)"')`,
      target: `p50 ≤ ${WARM_TARGET_MS} ms`,
      verdict: warmP50 <= WARM_TARGET_MS ? 'PASS' : 'FAIL',
    });
    rows.push({
      metric: `create→first runCode from the pool, p50 / p99 (serial, n=${CREATES})`,
      tidepool: `${ms(createP50)} / ${ms(percentile(creates, 99))}`,
      baseline: '',
      target: `p50 ≤ ${CREATE_TARGET_MS} ms`,
      verdict: createP50 <= CREATE_TARGET_MS ? 'PASS' : 'FAIL',
    });
  } finally {
    await api.stop();
  }
  return rows;
}
