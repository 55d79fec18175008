// pnpm bench:envd: envd's hot paths through the published e2b SDK, each beside a local baseline
// measured in the same run and beside its target.
//
//   commands.run('true') round trip   vs spawning `true` with child_process
//   256 MiB upload (files.write, stream) and download (files.read, stream)   vs a local file write/read
//   envd RSS idle and peak during the transfers (envd runs as a child; /proc/<pid>/status)
//
// envd is the production bundle (scripts/bundle.mjs) started with the host's Node on 127.0.0.1.
// Run as root, like envd in a sandbox. BENCH_RUNS (default 300), BENCH_MIB (default 256);
// BENCH_STRICT=1 exits 2 when a target is missed; BENCH_EXEC_HELPER=0 skips the exec-as-user helper.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { getFreePort, waitForEnvd } from '@tidepool/testkit';
import { Sandbox } from 'e2b';

const envdRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = positiveInt('BENCH_RUNS', 300);
const WARMUP = 30;
const MIB = positiveInt('BENCH_MIB', 256);
const CHUNK = 1024 * 1024;

const TARGETS = {
  runP50Ms: 5,
  throughputMBps: 300,
  transferRssMB: 150,
  idleRssMB: 60,
};

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got '${raw}'`);
  return n;
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

// ---- envd as a child process -----------------------------------------------------------------

interface EnvdChild {
  url: string;
  pid: number;
  helper: string | undefined;
  stop(): Promise<void>;
}

function buildBundle(workDir: string): { bundle: string; helper: string | undefined } {
  const bundle = join(envdRoot, 'dist', 'envd.mjs'); // next to apps/envd/node_modules, so node-pty resolves
  const res = spawnSync(process.execPath, [join(envdRoot, 'scripts', 'bundle.mjs'), '--outfile', bundle], { stdio: 'inherit' });
  if (res.status !== 0) throw new Error('bundling envd failed');
  // The same exec-as-user helper the image ships, so process starts take the same path as in a sandbox.
  let helper: string | undefined;
  const script = join(envdRoot, 'native', 'build-exec-helper.sh');
  if (process.env.BENCH_EXEC_HELPER === '0') log('BENCH_EXEC_HELPER=0: envd spawns directly');
  else if (existsSync(script)) {
    helper = join(workDir, 'exec-as-user');
    if (spawnSync('sh', [script, helper], { stdio: 'inherit' }).status !== 0) {
      log('WARNING: could not build exec-as-user; envd will spawn directly');
      helper = undefined;
    }
  }
  return { bundle, helper };
}

/**
 * Node flags for envd (BENCH_NODE_FLAGS, space-separated; none by default, as native/envd-launcher.c starts it),
 * to measure a V8 flag's effect on RSS, exec latency and transfers before putting it in the launcher.
 */
function benchNodeFlags(): string[] {
  return (process.env.BENCH_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean);
}

async function startEnvdChild(workDir: string): Promise<EnvdChild> {
  const { bundle, helper } = buildBundle(workDir);
  const port = await getFreePort();
  // Debug mode: there is no platform to place an access token at birth (envd refuses to start without one).
  const env: NodeJS.ProcessEnv = { ...process.env, ENVD_FORWARD_LOCAL_PORTS: 'false' };
  if (helper) env.ENVD_EXEC_HELPER = helper;
  const nodeFlags = benchNodeFlags();
  if (nodeFlags.length > 0) log(`node flags: ${nodeFlags.join(' ')}`);
  const child: ChildProcess = spawn(process.execPath, [...nodeFlags, bundle, '-debug', '-port', String(port), '-host', '127.0.0.1', '-log-level', 'warn'], {
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = `http://127.0.0.1:${port}`;
  await waitForEnvd(url, 20_000, async () => child.exitCode === null);
  return {
    url,
    pid: child.pid!,
    helper,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

function rssMB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** Samples a process's RSS every few ms while `work` runs; returns the peak. */
async function withPeakRss<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; peakMB: number }> {
  let peak = rssMB(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMB(pid));
    } catch {
      // process gone; the work will fail on its own
    }
  }, 10);
  try {
    const result = await work();
    peak = Math.max(peak, rssMB(pid));
    return { result, peakMB: peak };
  } finally {
    clearInterval(timer);
  }
}

// ---- measurements ------------------------------------------------------------------------------

interface Latency {
  p50: number;
  p99: number;
  mean: number;
}

function summarize(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  return { p50: at(0.5), p99: at(0.99), mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}

async function time(runs: number, fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return samples;
}

// Commands run as an unprivileged user with a stock profile (as `user` in a sandbox): the host's
// root profile (pyenv, cargo, nvm…) would otherwise dominate every login shell. BENCH_USER overrides.
const BENCH_USER = process.env.BENCH_USER ?? (process.getuid?.() === 0 ? 'nobody' : undefined);
const benchIds = ((): { uid: number; gid: number } | undefined => {
  if (!BENCH_USER) return undefined;
  const uid = spawnSync('id', ['-u', BENCH_USER], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', BENCH_USER], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) throw new Error(`BENCH_USER '${BENCH_USER}' does not exist`);
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
})();

function spawnLocal(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore', cwd: '/tmp', ...(benchIds ?? {}) });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${file} exited ${code}`))));
  });
}
const spawnTrue = (): Promise<void> => spawnLocal('true', []);
// What envd actually starts for commands.run(cmd): the SDK sends `/bin/bash -l -c cmd`. A login
// shell reads the user's profile, which on a developer host can cost far more than envd itself.
const spawnLoginShell = (): Promise<void> => spawnLocal('/bin/bash', ['-l', '-c', 'true']);
const runTrue = (sbx: Sandbox): Promise<unknown> => sbx.commands.run('true', BENCH_USER ? { user: BENCH_USER, cwd: '/tmp' } : {});

/** Deterministic, incompressible-enough payload chunk, reused for every MiB. */
function payloadChunk(): Buffer {
  const chunk = Buffer.alloc(CHUNK);
  let x = 0x9e3779b9;
  for (let i = 0; i < CHUNK; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    chunk.writeUInt32LE(x >>> 0, i);
  }
  return chunk;
}

function payloadStream(chunk: Buffer, mib: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === mib) {
        controller.close();
        return;
      }
      sent++;
      controller.enqueue(new Uint8Array(chunk)); // a copy: the consumer may hold on to it
    },
  });
}

async function localWrite(path: string, chunk: Buffer, mib: number): Promise<void> {
  const out = createWriteStream(path);
  for (let i = 0; i < mib; i++) {
    if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
}

async function localRead(path: string): Promise<number> {
  let bytes = 0;
  await pipeline(createReadStream(path, { highWaterMark: CHUNK }), async function* (source: AsyncIterable<Buffer>) {
    for await (const part of source) bytes += part.length;
  });
  return bytes;
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<number> {
  let bytes = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.byteLength;
  }
}

const mbps = (bytes: number, ms: number): number => bytes / 1e6 / (ms / 1000);

// ---- report ------------------------------------------------------------------------------------

interface Row {
  metric: string;
  envd: string;
  baseline: string;
  target: string;
  ok: boolean | undefined;
}

function printTable(rows: Row[]): void {
  const header = { metric: 'metric', envd: 'envd', baseline: 'baseline (local)', target: 'target', ok: 'ok' };
  const cells = rows.map((r) => ({ ...r, ok: r.ok === undefined ? '' : r.ok ? 'yes' : 'NO' }));
  const all = [header, ...cells];
  const width = (k: keyof typeof header): number => Math.max(...all.map((r) => String(r[k]).length));
  const cols = ['metric', 'envd', 'baseline', 'target', 'ok'] as const;
  const line = (r: Record<(typeof cols)[number], string>): string =>
    cols.map((k) => (k === 'metric' ? r[k].padEnd(width(k)) : r[k].padStart(width(k)))).join('  ');
  const out = [line(header), cols.map((k) => '-'.repeat(width(k))).join('  '), ...cells.map(line)];
  process.stdout.write(`\n${out.join('\n')}\n`);
}

const ms = (v: number): string => `${v.toFixed(2)} ms`;

async function main(): Promise<void> {
  if (process.platform !== 'linux') throw new Error('the envd bench needs Linux (/proc for RSS)');
  if (process.getuid?.() !== 0) log('WARNING: not root; envd runs commands as the current user (in a sandbox it runs as root)');
  const workDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-'));
  const envd = await startEnvdChild(workDir);
  const rows: Row[] = [];
  try {
    const sbx = await Sandbox.create({ debug: true, sandboxUrl: envd.url, apiKey: 'bench' });
    log(`envd pid ${envd.pid} at ${envd.url}${envd.helper ? ' (processes via exec-as-user)' : ''}`);

    // Idle RSS: after startup and one command, once things settle.
    await sbx.commands.run('true');
    await new Promise((r) => setTimeout(r, 1_000));
    const idleMB = rssMB(envd.pid);

    // -- command round trip
    log(`commands.run('true') x ${RUNS} after ${WARMUP} warm-up runs${BENCH_USER ? ` as ${BENCH_USER}` : ''}`);
    await time(WARMUP, () => runTrue(sbx));
    await time(WARMUP, spawnTrue);
    await time(Math.min(WARMUP, 5), spawnLoginShell);
    const envdRun = summarize(await time(RUNS, () => runTrue(sbx)));
    const localRun = summarize(await time(RUNS, spawnTrue));
    const shellRun = summarize(await time(Math.min(RUNS, 100), spawnLoginShell));
    rows.push(
      { metric: "commands.run('true') p50", envd: ms(envdRun.p50), baseline: ms(localRun.p50), target: `<= ${TARGETS.runP50Ms} ms`, ok: envdRun.p50 <= TARGETS.runP50Ms },
      { metric: "commands.run('true') p99", envd: ms(envdRun.p99), baseline: ms(localRun.p99), target: '', ok: undefined },
      { metric: "commands.run('true') mean", envd: ms(envdRun.mean), baseline: ms(localRun.mean), target: '', ok: undefined },
      { metric: '  local `bash -l -c true` p50 (what envd runs)', envd: '', baseline: ms(shellRun.p50), target: '', ok: undefined },
      { metric: '  envd overhead p50 (run - login shell)', envd: ms(envdRun.p50 - shellRun.p50), baseline: '', target: '', ok: undefined },
    );

    // -- transfers (each section reports its own failure so a partial envd still gives numbers)
    let peakMB = Number.NaN;
    try {
      const chunk = payloadChunk();
      const bytes = MIB * CHUNK;
      const remotePath = join(workDir, 'upload.bin');
      const localPath = join(workDir, 'local.bin');

      log(`uploading ${MIB} MiB`);
      const up = await withPeakRss(envd.pid, async () => {
        const start = performance.now();
        await sbx.files.write(remotePath, payloadStream(chunk, MIB), { requestTimeoutMs: 600_000 });
        return performance.now() - start;
      });
      if (statSync(remotePath).size !== bytes) throw new Error(`upload wrote ${statSync(remotePath).size} bytes, expected ${bytes}`);

      log(`downloading ${MIB} MiB`);
      const down = await withPeakRss(envd.pid, async () => {
        const start = performance.now();
        const stream = await sbx.files.read(remotePath, { format: 'stream', requestTimeoutMs: 600_000 });
        const got = await drain(stream);
        if (got !== bytes) throw new Error(`download returned ${got} bytes, expected ${bytes}`);
        return performance.now() - start;
      });

      const lwStart = performance.now();
      await localWrite(localPath, chunk, MIB);
      const localWriteMs = performance.now() - lwStart;
      const lrStart = performance.now();
      if ((await localRead(localPath)) !== bytes) throw new Error('local read size mismatch');
      const localReadMs = performance.now() - lrStart;

      const upMBps = mbps(bytes, up.result);
      const downMBps = mbps(bytes, down.result);
      peakMB = Math.max(up.peakMB, down.peakMB);
      rows.push(
        { metric: `upload ${MIB} MiB (files.write stream)`, envd: `${upMBps.toFixed(0)} MB/s`, baseline: `${mbps(bytes, localWriteMs).toFixed(0)} MB/s`, target: `>= ${TARGETS.throughputMBps} MB/s`, ok: upMBps >= TARGETS.throughputMBps },
        { metric: `download ${MIB} MiB (files.read stream)`, envd: `${downMBps.toFixed(0)} MB/s`, baseline: `${mbps(bytes, localReadMs).toFixed(0)} MB/s`, target: `>= ${TARGETS.throughputMBps} MB/s`, ok: downMBps >= TARGETS.throughputMBps },
        { metric: 'envd RSS idle', envd: `${idleMB.toFixed(1)} MB`, baseline: '', target: `<= ${TARGETS.idleRssMB} MB`, ok: idleMB <= TARGETS.idleRssMB },
        { metric: 'envd RSS peak during upload', envd: `${up.peakMB.toFixed(1)} MB`, baseline: '', target: `< ${TARGETS.transferRssMB} MB`, ok: up.peakMB < TARGETS.transferRssMB },
        { metric: 'envd RSS peak during download', envd: `${down.peakMB.toFixed(1)} MB`, baseline: '', target: `< ${TARGETS.transferRssMB} MB`, ok: down.peakMB < TARGETS.transferRssMB },
      );
    } catch (error) {
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      log(`transfer benchmark failed: ${reason}`);
      rows.push({ metric: `upload/download ${MIB} MiB`, envd: `FAILED (${reason.slice(0, 60)})`, baseline: '', target: `>= ${TARGETS.throughputMBps} MB/s`, ok: false });
      rows.push({ metric: 'envd RSS idle', envd: `${idleMB.toFixed(1)} MB`, baseline: '', target: `<= ${TARGETS.idleRssMB} MB`, ok: idleMB <= TARGETS.idleRssMB });
    }
    printTable(rows);
    process.stdout.write(
      `\nenvd ${envd.url} (pid ${envd.pid}, Node ${process.version}, ${envd.helper ? 'exec-as-user' : 'direct spawn'}); commands as ${BENCH_USER ?? 'the current user'}, baselines too; ` +
        `${RUNS} runs after ${WARMUP} warm-up; ${MIB} MiB in 1 MiB chunks to ${tmpdir()}; peak RSS ${peakMB.toFixed(1)} MB\n`,
    );
    const missed = rows.filter((r) => r.ok === false).length;
    process.stdout.write(missed === 0 ? 'all targets met\n' : `${missed} target(s) missed\n`);
    if (missed > 0 && process.env.BENCH_STRICT === '1') process.exitCode = 2;
  } finally {
    await envd.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
