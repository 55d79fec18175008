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
 *
 * A/B: BENCH_CI_B_SERVER=<dir> names another bundle of the server (`node apps/code-interpreter/scripts/bundle.mjs
 * --outdir <dir>`, e.g. of another commit). It is copied into the warm sandbox and started there on port 49998 beside
 * the image's own; runCode('1+1') then also runs against it, interleaved, through the same SDK and proxy (the
 * SDK's port header is rewritten for those calls), and its figures get a row of their own.
 *
 * A/B of create → first runCode: BENCH_CI_B_IMAGE=<image> (a code-interpreter image with another server, e.g. built
 * from another commit with docker/code-interpreter/Dockerfile) starts a second API process whose template runs that
 * image, with a pool of its own; creates then alternate between the two platforms (both pools full before each).
 * BENCH_CI_SETTLE_MS waits that long after the pools are full before each create (what a pool that was filled a
 * while before a claim gives).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Sandbox } from '@e2b/code-interpreter';
import { type ApiProcess, startApiProcess } from './api-process.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';

const RUNS = Number(process.env.BENCH_CI_RUNS ?? 200);
const CREATES = Number(process.env.BENCH_CI_CREATES ?? 20);
const POOL = Math.max(1, Number(process.env.BENCH_CI_POOL ?? 2));
const B_SERVER = process.env.BENCH_CI_B_SERVER;
const B_PORT = 49998;
const B_IMAGE = process.env.BENCH_CI_B_IMAGE;
const SETTLE_MS = Number(process.env.BENCH_CI_SETTLE_MS ?? 0);
const WARM_TARGET_MS = 15;
const CREATE_TARGET_MS = 150;

type Log = (message: string) => void;

/** Ready pool containers of the platform, from its Prometheus `/metrics`. */
async function poolReady(url: string, adminKey: string): Promise<number> {
  const response = await fetch(`${url}/metrics`, { headers: { 'X-API-Key': adminKey } });
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  const text = await response.text();
  let ready = 0;
  for (const match of text.matchAll(/^tidepool_pool_containers\{[^}]*state="ready"[^}]*\} (\d+)/gm)) ready += Number(match[1]);
  return ready;
}

async function untilPoolFull(url: string, adminKey: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await poolReady(url, adminKey)) < POOL) {
    if (Date.now() > deadline) throw new Error(`the code-interpreter pool did not reach ${POOL} ready within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Points the SDK's calls at port `port` of the sandbox while `redirect.port` is set: the SDK sends every request to
 * the code-interpreter server with an `E2b-Sandbox-Port: 49999` header, and the proxy routes by it.
 */
const redirect: { port?: number } = {};
function installPortRedirect(): () => void {
  const original = globalThis.fetch;
  globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
    const headers = init?.headers as Record<string, string> | undefined;
    if (redirect.port === undefined || !headers || headers['E2b-Sandbox-Port'] !== '49999') return original(input, init);
    return original(input, { ...init, headers: { ...headers, 'E2b-Sandbox-Port': String(redirect.port) } });
  };
  return () => {
    globalThis.fetch = original;
  };
}

/** Copies the bundle in `dir` into the sandbox and starts it on B_PORT (Python context only); resolves once it answers. */
async function startServerB(sbx: Sandbox, dir: string, url: string): Promise<void> {
  const target = '/tmp/tidepool-ci-b';
  for (const name of await readdir(dir)) await sbx.files.write(`${target}/${name}`, await readFile(join(dir, name), 'utf8'));
  await sbx.commands.run(`/opt/tidepool/bin/node ${target}/server.mjs >${target}/server.log 2>&1`, {
    background: true,
    envs: { CODE_INTERPRETER_PORT: String(B_PORT), CODE_INTERPRETER_PRESTART: 'python', CODE_INTERPRETER_SPARES: '' },
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const health = await fetch(`${url}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(B_PORT) } }).catch(() => undefined);
    if (health?.ok) return;
    if (Date.now() > deadline) throw new Error(`the server of ${dir} did not answer on port ${B_PORT} within 120 s: ${(await sbx.files.read(`${target}/server.log`).catch(() => '')).slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

function expectTwo(text: string | undefined, what: string): void {
  if (text?.trim() !== '2') throw new Error(`${what} gave ${JSON.stringify(text)}, not 2`);
}

/** Sandbox.create() → first runCode('1+1') result, in ms. */
async function createThenRun(opts: { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number }): Promise<number> {
  const start = now();
  const sbx = await Sandbox.create(opts);
  try {
    const execution = await sbx.runCode('1+1');
    const elapsed = now() - start;
    expectTwo(execution.text, 'runCode after create');
    return elapsed;
  } finally {
    await sbx.kill().catch(() => undefined);
  }
}

export async function benchCodeInterpreter(log: Log): Promise<Row[]> {
  log(`code-interpreter: API in its own process with TIDEPOOL_WARM_POOL=code-interpreter=${POOL}`);
  const api = await startApiProcess({ TIDEPOOL_WARM_POOL: `code-interpreter=${POOL}` });
  const opts = { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 60_000 };
  const rows: Row[] = [];
  let apiB: ApiProcess | undefined;
  try {
    if (B_IMAGE) {
      log(`code-interpreter: a second API process whose template runs ${B_IMAGE}`);
      apiB = await startApiProcess({ TIDEPOOL_WARM_POOL: `code-interpreter=${POOL}`, TIDEPOOL_CODE_INTERPRETER_IMAGE: B_IMAGE });
    }
    const platforms = [api, ...(apiB ? [apiB] : [])];
    const poolsFull = async (timeoutMs: number) => {
      for (const platform of platforms) await untilPoolFull(platform.url, platform.adminKey, timeoutMs);
    };
    log('code-interpreter: waiting for the pool to fill');
    await poolsFull(10 * 60_000);

    // -- create → first runCode from the pool (A and B alternating which goes first) ---------------------------
    const creates: number[] = [];
    const createsB: number[] = [];
    for (let i = -1; i < CREATES; i += 1) {
      const order = i % 2 === 0 ? platforms : [...platforms].reverse();
      for (const platform of order) {
        await poolsFull(5 * 60_000);
        if (SETTLE_MS > 0) await new Promise((r) => setTimeout(r, SETTLE_MS));
        const elapsed = await createThenRun({ apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url, requestTimeoutMs: 60_000 });
        if (i >= 0) (platform === api ? creates : createsB).push(elapsed); // the first round is a warm-up
      }
    }
    log(`code-interpreter: create→first runCode ×${CREATES} done`);

    // -- warm runCode beside commands.run(python3 -c) ------------------------------------------------------------
    const sbx = await Sandbox.create({ ...opts, timeoutMs: 600_000 });
    const warm: number[] = [];
    const warmB: number[] = [];
    const python: number[] = [];
    const restoreFetch = installPortRedirect();
    const runCodeOn = async (port: number | undefined): Promise<number> => {
      redirect.port = port;
      try {
        const start = now();
        const execution = await sbx.runCode('1+1');
        const elapsed = now() - start;
        expectTwo(execution.text, port ? `runCode on port ${port}` : 'runCode');
        return elapsed;
      } finally {
        redirect.port = undefined;
      }
    };
    try {
      if (B_SERVER) {
        log(`code-interpreter: starting the server of ${B_SERVER} in the sandbox on port ${B_PORT}`);
        await startServerB(sbx, B_SERVER, api.url);
      }
      for (let i = 0; i < 20; i += 1) {
        await runCodeOn(undefined);
        if (B_SERVER) await runCodeOn(B_PORT);
        expectTwo((await sbx.commands.run('python3 -c "print(1+1)"')).stdout, 'warm-up python3 -c');
      }
      log(`code-interpreter: runCode('1+1') ×${RUNS} interleaved with commands.run('python3 -c …')${B_SERVER ? ` and runCode on ${B_SERVER}` : ''}`);
      for (let i = 0; i < RUNS; i += 1) {
        // A and B alternate which goes first, so neither always follows the baseline's python3 start.
        if (B_SERVER && i % 2 === 1) warmB.push(await runCodeOn(B_PORT));
        warm.push(await runCodeOn(undefined));
        if (B_SERVER && i % 2 === 0) warmB.push(await runCodeOn(B_PORT));
        const start = now();
        const result = await sbx.commands.run('python3 -c "print(1+1)"');
        python.push(now() - start);
        expectTwo(result.stdout, 'python3 -c');
      }
    } finally {
      restoreFetch();
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
    if (B_SERVER) {
      rows.push({
        metric: `runCode('1+1') warm on ${B_SERVER} (port ${B_PORT}, interleaved), p50 / p99 (n=${RUNS})`,
        tidepool: `${ms(percentile(warmB, 50))} / ${ms(percentile(warmB, 99))}`,
        baseline: '',
        target: '',
        verdict: 'info',
      });
    }
    rows.push({
      metric: `create→first runCode from the pool, p50 / p99 (serial, n=${CREATES}${SETTLE_MS ? `, ${SETTLE_MS} ms after the pool filled` : ''})`,
      tidepool: `${ms(createP50)} / ${ms(percentile(creates, 99))}`,
      baseline: '',
      target: `p50 ≤ ${CREATE_TARGET_MS} ms`,
      verdict: createP50 <= CREATE_TARGET_MS ? 'PASS' : 'FAIL',
    });
    if (apiB) {
      rows.push({
        metric: `create→first runCode from the pool on ${B_IMAGE} (alternating), p50 / p99 (n=${CREATES})`,
        tidepool: `${ms(percentile(createsB, 50))} / ${ms(percentile(createsB, 99))}`,
        baseline: '',
        target: '',
        verdict: 'info',
      });
    }
  } finally {
    await Promise.all([api.stop(), apiB?.stop()]);
  }
  return rows;
}
