/**
 * `BENCH_SECTIONS=burst`: c=N create→first command through the published SDK from a full pinned pool of N, with the
 * platform in its own process (burst-api-host.ts) so its CPU per create is its own: `process.cpuUsage()` of that
 * process from the burst's start to its last answer, divided by N. The SDK runs in BENCH_BURST_CLIENTS client
 * processes (pool-burst-client.ts). With BENCH_BURST_BEFORE_DIR (another checkout's `apps/api`) a second platform
 * of that checkout runs beside this one and the bursts alternate between them round by round (the order rotating),
 * each burst started only when both pools are full and idle: an A/B of the same load in one run.
 *
 * Sizes: BENCH_BURST_SIZES (20,50; each size its own pool of that size), BENCH_BURST_ROUNDS (4 per variant and size).
 * Each burst's line also gives the whole machine's CPU over it (machine-cpu.ts).
 * BENCH_BURST_PROFILE_DIR: after the measured rounds one more burst per variant and size is profiled (the
 * inspector's sampling profiler, for exactly the burst) into `<dir>/<variant>-c<N>.cpuprofile`, and summarised
 * per create (cpu-profile-summary.ts). The platforms log at their default level into `<variant>-c<N>.log` of a
 * temporary directory, printed at the end.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ms, percentile, type Row } from './bench-stats.ts';
import type { HostReply, HostRequest } from './burst-api-host.ts';
import { profileReport } from './cpu-profile-summary.ts';
import { type MachineCpu, machineCpuWindow } from './machine-cpu.ts';
import { BURST_CLIENTS, type BurstResult, burstFromClient } from './pool-bench.ts';

const SIZES = (process.env.BENCH_BURST_SIZES ?? '20,50').split(',').map((s) => Math.max(1, Number(s.trim())));
const ROUNDS = Math.max(1, Number(process.env.BENCH_BURST_ROUNDS ?? 4));
const TARGET_P99_MS: Record<number, number> = { 20: 300, 50: 600 };

type Log = (message: string) => void;

interface Host {
  name: string;
  url: string;
  apiKey: string;
  call(request: HostRequest): Promise<unknown>;
  stop(): Promise<void>;
}

async function startHost(name: string, apiDir: string, pool: number, logFile: string): Promise<Host> {
  const here = dirname(fileURLToPath(import.meta.url));
  const out = openSync(logFile, 'a');
  const child: ChildProcess = fork(join(here, 'burst-api-host.ts'), [], {
    cwd: apiDir,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BURST_API_DIR: apiDir, BURST_POOL: String(pool) },
    stdio: ['ignore', out, out, 'ipc'],
  });
  const waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let nextId = 1;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const started = new Promise<{ url: string; apiKey: string }>((resolve, reject) => {
    waiting.set(0, { resolve: (value) => resolve(value as { url: string; apiKey: string }), reject });
    void exited.then(() => reject(new Error(`the ${name} platform exited before it started; see ${logFile}`)));
  });
  child.on('message', (reply: HostReply) => {
    const waiter = waiting.get(reply.id);
    waiting.delete(reply.id);
    if (reply.ok) waiter?.resolve(reply.value);
    else waiter?.reject(new Error(reply.error));
  });
  void exited.then(() => {
    for (const waiter of waiting.values()) waiter.reject(new Error(`the ${name} platform exited; see ${logFile}`));
    waiting.clear();
  });
  const { url, apiKey } = await started;
  const call = (request: HostRequest): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      child.send({ id, request });
    });
  return {
    name,
    url,
    apiKey,
    call,
    async stop() {
      if (child.exitCode !== null) return;
      await call({ op: 'close' }).catch(() => undefined);
      const timeout = setTimeout(() => child.kill('SIGKILL'), 120_000);
      await exited;
      clearTimeout(timeout);
    },
  };
}

async function fullAndIdle(hosts: Host[], size: number): Promise<void> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const stats = (await Promise.all(hosts.map((h) => h.call({ op: 'stats' })))) as Array<{ ready: number; warming: number }>;
    if (stats.every((s) => s.ready === size && s.warming === 0)) return;
    if (Date.now() > deadline) throw new Error(`the pools did not fill to ${size} within 10 min: ${JSON.stringify(stats)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Measured {
  result: BurstResult;
  /** The platform's CPU from the burst's start to its last answer (ms). */
  apiCpuMs: number;
  /** Pool containers being started when the burst's last answer came (the refill overlapping the burst). */
  warmingAtEnd: number;
  /** Every process's CPU on the machine over the burst. */
  machine: MachineCpu;
}

/** One burst of `size` against `host`, started when every host's pool is full and idle. */
async function measuredBurst(host: Host, all: Host[], size: number, profileFile?: string): Promise<Measured> {
  let cpuBefore = 0;
  let machineWindow = machineCpuWindow();
  const result = await burstFromClient(host, size, async () => {
    await fullAndIdle(all, size);
    // Let the pools' last refill bookkeeping and the clients' warm-up kills settle.
    await new Promise((r) => setTimeout(r, 1_000));
    if (profileFile) await host.call({ op: 'profile-start' });
    cpuBefore = (await host.call({ op: 'cpu' })) as number;
    machineWindow = machineCpuWindow();
  });
  const machine = machineWindow();
  const apiCpuMs = ((await host.call({ op: 'cpu' })) as number) - cpuBefore;
  const { warming } = (await host.call({ op: 'stats' })) as { warming: number };
  if (profileFile) await host.call({ op: 'profile-stop', file: profileFile });
  await host.call({ op: 'kill', sandboxIds: result.sandboxIds });
  return { result, apiCpuMs, warmingAtEnd: warming, machine };
}

const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' ');

export async function benchBurstAb(log: Log): Promise<Row[]> {
  const here = dirname(fileURLToPath(import.meta.url));
  const variants: Array<[string, string]> = [['after', join(here, '..')]];
  if (process.env.BENCH_BURST_BEFORE_DIR) variants.push(['before', process.env.BENCH_BURST_BEFORE_DIR]);
  const profileDir = process.env.BENCH_BURST_PROFILE_DIR;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const logDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-burst-logs-'));
  const rows: Row[] = [];
  for (const size of SIZES) {
    log(`burst: pools of ${size} for ${variants.map(([n]) => n).join(' and ')} (logs in ${logDir}); load average ${load()}`);
    const hosts: Host[] = [];
    try {
      for (const [name, dir] of variants) hosts.push(await startHost(name, dir, size, join(logDir, `${name}-c${size}.log`)));
      const measured = new Map<string, Measured[]>(hosts.map((h) => [h.name, []]));
      for (let round = 0; round < ROUNDS; round += 1) {
        const order = hosts.map((_, i) => hosts[(i + round) % hosts.length]!);
        for (const host of order) {
          const m = await measuredBurst(host, hosts, size);
          measured.get(host.name)!.push(m);
          const failures = m.result.failures.length;
          log(`burst c=${size} ${host.name} round ${round + 1}: p50 ${ms(percentile(m.result.latencies, 50))} p99 ${ms(percentile(m.result.latencies, 99))}, ${m.result.latencies.length}/${size}${failures ? ` (${[...new Set(m.result.failures)].slice(0, 3).join(' | ')})` : ''}, API CPU ${ms(m.apiCpuMs / size)}/create, SDK ${ms(m.result.clientCpuMs / size)}/create, machine ${ms(m.machine.busyMs / size)}/create (cores ${(m.machine.busyShare * 100).toFixed(0)}% busy over ${ms(m.machine.wallMs)}), warming at end ${m.warmingAtEnd}; load ${load()}`);
        }
      }
      for (const host of hosts) {
        const runs = measured.get(host.name)!;
        const latencies = runs.flatMap((m) => m.result.latencies);
        const p99s = runs.map((m) => percentile(m.result.latencies, 99));
        const target = TARGET_P99_MS[size];
        const p99 = percentile(latencies, 99);
        rows.push({
          metric: `burst c=${size} from a pool of ${size} (${host.name}, ${ROUNDS} bursts, ${Math.min(BURST_CLIENTS, size)} SDK processes): p50 / p99 of all; each burst's p99`,
          tidepool: `${ms(percentile(latencies, 50))} / ${ms(p99)}; ${p99s.map((p) => p.toFixed(0)).join(', ')}`,
          baseline: `${latencies.length}/${size * ROUNDS} succeeded`,
          target: target ? `p99 ≤ ${target} ms` : '',
          verdict: target ? (p99 <= target && latencies.length === size * ROUNDS ? 'PASS' : 'FAIL') : 'info',
        });
        // A refill that began before the burst's last answer (the pool waits 1 s after the last claim; a slow burst
        // outlasts that) adds its container starts to the burst's CPU: those bursts are marked with `r`.
        const clean = runs.filter((m) => m.warmingAtEnd === 0).map((m) => m.apiCpuMs / size);
        rows.push({
          metric: `burst c=${size} (${host.name}): the platform's CPU per create→first command, median of bursts without a refill in them (each; r: a refill began during it)`,
          tidepool: `${clean.length > 0 ? ms(percentile(clean, 50)) : 'n/a'} (${runs.map((m) => `${(m.apiCpuMs / size).toFixed(1)}${m.warmingAtEnd > 0 ? 'r' : ''}`).join(', ')})`,
          baseline: `SDK ${ms(percentile(runs.map((m) => m.result.clientCpuMs / size), 50))} per create in its client processes`,
          target: '',
          verdict: 'info',
        });
        // Every process's CPU over the burst: when the cores were busy all along, the burst could not end sooner than
        // the CPU its work needs divided by the cores, whatever is waited on.
        const { cores } = runs[0]!.machine;
        rows.push({
          metric: `burst c=${size} (${host.name}): the machine's CPU over each burst, all processes (SDK, platform, engine, envd, shells, kernel), per create; the cores' busy share`,
          tidepool: `${ms(percentile(runs.map((m) => m.machine.busyMs / size), 50))} per create (${runs.map((m) => (m.machine.busyMs / size).toFixed(1)).join(', ')}); ${runs.map((m) => `${(m.machine.busyShare * 100).toFixed(0)}%`).join(', ')} of ${cores} cores`,
          baseline: `floor of a burst at that CPU: ${ms((percentile(runs.map((m) => m.machine.busyMs), 50)) / cores)} (all of it spread over ${cores} cores)`,
          target: '',
          verdict: 'info',
        });
      }
      if (profileDir) {
        for (const host of hosts) {
          const file = join(profileDir, `${host.name}-c${size}.cpuprofile`);
          const m = await measuredBurst(host, hosts, size, file);
          log(`profiled burst c=${size} ${host.name}: API CPU ${ms(m.apiCpuMs / size)}/create (with the profiler on)`);
          const unprofiled = percentile(measured.get(host.name)!.filter((r) => r.warmingAtEnd === 0).map((r) => r.apiCpuMs / size), 50);
          for (const line of profileReport(file, size, Number.isNaN(unprofiled) ? undefined : unprofiled)) log(line);
        }
      }
    } finally {
      await Promise.all(hosts.map((h) => h.stop()));
    }
  }
  log(`burst: load average at the end ${load()}`);
  return rows;
}
