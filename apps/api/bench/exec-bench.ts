/**
 * Exec latency through the platform: `commands.run('true')` on one running sandbox, through the API's proxy
 * (the SDK's path), BENCH_EXEC times (200) after 20 warm-up rounds. The API runs as its own process (as
 * `npm start` runs it), so the SDK's CPU and the API's do not queue on one event loop. Interleaved with it, round
 * by round (the order rotating), in the same run:
 *   SDK floor   the same call against a server that answers at once (instant-start-server.ts, nothing
 *               spawned): what the client alone costs on this machine
 *   direct      the same call straight to the sandbox's envd at its bridge address (no proxy)
 *   before      with BENCH_EXEC_BEFORE_DIR (an `apps/api` directory of another checkout) and/or
 *               BENCH_EXEC_BEFORE_IMAGE (a base image): the same call through a second API process of that
 *               checkout, to a sandbox of that image: an A/B of a change in one run
 * and after them: docker exec <that container> bash -l -c true; `bash -l -c true`, `bash -c true` and `/bin/true`
 * started by a shell inside the sandbox as `user` (the SDK runs every command as `bash -l -c`, and that is what
 * envd starts), interleaved. The CPU the API, envd and the shells spent per call is read from /proc (root).
 * BENCH_EXEC_PROFILE_DIR: the API processes run with `--cpu-prof` into that directory.
 */
import { readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';
import { startApiProcess, type ApiProcess } from './api-process.ts';
import { cpuOf, startBenchServer } from './bench-processes.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { containerShellBaseline, docker, dockerExecBaseline } from './docker-baseline.ts';

const RUNS = Number(process.env.BENCH_EXEC ?? 200);
const WARMUP = 20;
const TARGET_P50_MS = 5;
/** What the platform may add to the call above the SDK floor of the same run (issue 20). */
const TARGET_ADDED_MS = 4;
const SHELL_COMMANDS = ['bash -l -c true', 'bash -c true', '/bin/true'] as const;

function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
}

/** A sandbox's container, its bridge address and (read from the host's /proc) its envd and spawn server. */
interface SandboxProcesses {
  containerId: string;
  address: string;
  envdPid: number | undefined;
  spawnServerPid: number | undefined;
}

async function sandboxProcesses(sandboxId: string): Promise<SandboxProcesses> {
  const containerId = (await docker(['ps', '-q', '--no-trunc', '--filter', `label=dev.tidepool.sandbox-id=${sandboxId}`])).split('\n')[0]!;
  const [pid, address] = (await docker(['inspect', '--format', '{{.State.Pid}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', containerId])).split(' ');
  let envdPid: number | undefined;
  let spawnServerPid: number | undefined;
  try {
    // tini → envd → its exec-as-user spawn server (started with envd's first command; the warm-up ran some).
    envdPid = childrenOf(Number(pid)).find((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('envd'));
    if (envdPid !== undefined) spawnServerPid = childrenOf(envdPid).find((child) => readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('--serve'));
  } catch {
    // not root, or another /proc: no CPU figures
  }
  return { containerId, address: address!, envdPid, spawnServerPid };
}

interface Variant {
  name: string;
  sandbox: Sandbox;
  samples: number[];
}

/** CPU spent by each process over the measured rounds, per call of the variants that reach it. */
class CpuLedger {
  private readonly start = new Map<string, number>();
  private readonly end = new Map<string, number>();
  constructor(private readonly probes: Record<string, () => number>) {}

  mark(into: 'start' | 'end'): void {
    for (const [name, read] of Object.entries(this.probes)) {
      try {
        (into === 'start' ? this.start : this.end).set(name, read());
      } catch {
        // process gone or unreadable: no figure
      }
    }
  }

  perCall(name: string, calls: number): string {
    const a = this.start.get(name);
    const b = this.end.get(name);
    return a === undefined || b === undefined ? 'n/a' : ms((b - a) / calls);
  }
}

async function sandboxFor(api: ApiProcess): Promise<Sandbox> {
  return Sandbox.create({ apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 60_000 });
}

export async function benchExec(log: (m: string) => void): Promise<Row[]> {
  const beforeDir = process.env.BENCH_EXEC_BEFORE_DIR;
  const beforeImage = process.env.BENCH_EXEC_BEFORE_IMAGE;
  const profileDir = process.env.BENCH_EXEC_PROFILE_DIR;
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const withBefore = beforeDir !== undefined || beforeImage !== undefined;
  log(`exec: commands.run('true') ×${RUNS} through the proxy of an API in its own process, interleaved with the SDK floor and envd direct${withBefore ? ' and the before variant' : ''}`);
  const api = await startApiProcess({}, undefined, nodeArgs);
  const before = withBefore ? await startApiProcess(beforeImage ? { TIDEPOOL_BASE_IMAGE: beforeImage } : {}, beforeDir, nodeArgs) : undefined;
  const instant = await startBenchServer('instant-start-server.ts');
  const sandboxes: Sandbox[] = [];
  try {
    const sbx = await sandboxFor(api);
    sandboxes.push(sbx);
    await sbx.commands.run('true');
    const procs = await sandboxProcesses(sbx.sandboxId);
    // The same sandbox with envd at its bridge address: the SDK's envd calls skip the proxy (its token from connect).
    const direct = await Sandbox.connect(sbx.sandboxId, { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: `http://${procs.address}:49983`, requestTimeoutMs: 60_000 });
    // debug: the SDK talks to sandboxUrl as to envd, with no platform call.
    const floorSbx = await Sandbox.create({ debug: true, sandboxUrl: instant.url, apiKey: 'floor' });
    const variants: Variant[] = [
      { name: 'floor', sandbox: floorSbx, samples: [] },
      { name: 'platform', sandbox: sbx, samples: [] },
      { name: 'direct', sandbox: direct, samples: [] },
    ];
    let beforeProcs: SandboxProcesses | undefined;
    if (before) {
      const beforeSbx = await sandboxFor(before);
      sandboxes.push(beforeSbx);
      await beforeSbx.commands.run('true');
      beforeProcs = await sandboxProcesses(beforeSbx.sandboxId);
      variants.push({ name: 'before', sandbox: beforeSbx, samples: [] });
    }
    for (let i = 0; i < WARMUP; i += 1) for (const v of variants) await v.sandbox.commands.run('true');
    const cpu = new CpuLedger({
      api: () => cpuOf(api.pid).own,
      envd: () => cpuOf(procs.envdPid!).own,
      shells: () => cpuOf(procs.spawnServerPid!).reaped,
      beforeApi: () => cpuOf(before!.pid).own,
      beforeEnvd: () => cpuOf(beforeProcs!.envdPid!).own,
      beforeShells: () => cpuOf(beforeProcs!.spawnServerPid!).reaped,
    });
    cpu.mark('start');
    for (let i = 0; i < RUNS; i += 1) {
      // Rotated each round, so no variant always runs right after the same other one.
      for (let k = 0; k < variants.length; k += 1) {
        const v = variants[(i + k) % variants.length]!;
        const start = now();
        await v.sandbox.commands.run('true').catch((error: unknown) => {
          const logs = [api, before].filter((p) => p !== undefined).map((p) => `${p.logFile}:\n${readFileSync(p.logFile, 'utf8').slice(-3000)}`);
          throw new Error(`exec bench: the ${v.name} call of round ${i} failed; the APIs' logs end with\n${logs.join('\n')}`, { cause: error });
        });
        v.samples.push(now() - start);
      }
    }
    cpu.mark('end');
    const baselineRuns = Math.min(RUNS, 50);
    log(`exec baselines: docker exec ×${baselineRuns}; ${SHELL_COMMANDS.join(', ')} in the sandbox ×${RUNS}, interleaved`);
    // The calls are measured by now: a container lost meanwhile (killed from outside) leaves these baselines n/a.
    const dockerExec = await dockerExecBaseline(procs.containerId, baselineRuns).catch(() => []);
    const shells = await containerShellBaseline(procs.containerId, RUNS, SHELL_COMMANDS).catch(() => SHELL_COMMANDS.map(() => []));
    const [loginShell, plainShell, trueAlone] = shells.map((s) => percentile(s, 50));
    const p50 = (name: string): number => percentile(variants.find((v) => v.name === name)!.samples, 50);
    const platform = variants[1]!.samples;
    const added = p50('platform') - p50('floor');
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    const rows: Row[] = [
      {
        metric: `exec: commands.run('true') p50 / p99 via proxy (n=${RUNS})`,
        tidepool: `${ms(p50('platform'))} / ${ms(percentile(platform, 99))}`,
        baseline: `${ms(percentile(dockerExec, 50))} docker exec; ${ms(loginShell!)} bash -l -c true run in the sandbox; ${ms(p50('floor'))} SDK floor`,
        target: `p50 ≤ ${TARGET_P50_MS} ms`,
        verdict: p50('platform') <= TARGET_P50_MS ? 'PASS' : 'FAIL',
      },
      {
        metric: 'exec: added above the SDK floor (platform p50 − floor p50)',
        tidepool: ms(added),
        baseline: `${ms(p50('floor'))} SDK floor (commands.run against a server answering at once)`,
        target: `≤ ${TARGET_ADDED_MS} ms`,
        verdict: added <= TARGET_ADDED_MS ? 'PASS' : 'FAIL',
      },
      {
        metric: 'exec: where it goes (p50 differences)',
        tidepool: `proxy ${ms(p50('platform') - p50('direct'))}; envd + shell ${ms(p50('direct') - p50('floor'))}`,
        baseline: `${ms(p50('direct'))} straight to envd; in the sandbox: ${ms(loginShell!)} bash -l -c true, ${ms(plainShell!)} bash -c true, ${ms(trueAlone!)} /bin/true`,
        target: '',
        verdict: 'info',
      },
      {
        metric: 'exec: CPU per call (/proc; 10 ms ticks)',
        tidepool: `API ${cpu.perCall('api', RUNS)}; envd ${cpu.perCall('envd', 2 * RUNS)}; the shell ${cpu.perCall('shells', 2 * RUNS)}`,
        baseline: `load average ${load}`,
        target: '',
        verdict: 'info',
      },
    ];
    if (before) {
      const beforeAdded = p50('before') - p50('floor');
      rows.push({
        metric: `exec: before (${[beforeDir, beforeImage].filter(Boolean).join(', ')}) p50, added above the floor`,
        tidepool: `${ms(p50('before'))}, added ${ms(beforeAdded)} (now ${ms(added)})`,
        baseline: `CPU per call: API ${cpu.perCall('beforeApi', RUNS)}; envd ${cpu.perCall('beforeEnvd', RUNS)}; the shell ${cpu.perCall('beforeShells', RUNS)}`,
        target: '',
        verdict: 'info',
      });
    }
    return rows;
  } finally {
    await Promise.all(sandboxes.map((s) => s.kill().catch(() => undefined)));
    instant.stop();
    await Promise.all([api.stop(), before?.stop()]);
  }
}
