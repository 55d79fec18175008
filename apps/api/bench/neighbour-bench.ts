/**
 * Noisy neighbours (BENCH_SECTIONS=neighbours; ~3 min): a sandbox that forks until its pids limit or fills its
 * memory must not slow the creates of other sandboxes. Serial Sandbox.create → first commands.run('true') (cold, no
 * pool: the path that needs the engine and a new envd) and commands.run('true') in an idle neighbour, measured
 *
 *   quiet        nothing else running (before and after the noisy phases: the same-run baseline)
 *   fork bomb    one sandbox runs `bomb() { bomb & bomb & wait; }; bomb` (every process waits for its children, so the
 *                count stays at the pids limit, 1024 by default) — measured once it is there
 *   memory fill  one sandbox runs `tail /dev/zero` in a loop (it grows to the sandbox's memory limit, is OOM-killed,
 *                starts again)
 *
 * The correctness side (a neighbour is created and works meanwhile, the noisy one can be killed) is
 * test/container-hardening.test.ts. Sizes: BENCH_NEIGHBOUR_CREATES (10 per phase), BENCH_NEIGHBOUR_EXECS (50).
 */
import { loadavg } from 'node:os';
import { Sandbox } from 'e2b';
import { SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { docker } from './docker-baseline.ts';
import { startPlatformForBench } from './platform-adapter.ts';

const CREATES = Number(process.env.BENCH_NEIGHBOUR_CREATES ?? 10);
const EXECS = Number(process.env.BENCH_NEIGHBOUR_EXECS ?? 50);
/** A noisy phase's create→first command p50 may be at most this many times the quiet one's. */
const BOUND = 1.5;

type Log = (message: string) => void;
type Sdk = { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number };

interface Phase {
  creates: number[];
  /** Creates that failed (on a loaded machine: envd not answering in time); not in `creates`. */
  failed: number;
  execs: number[];
  load: number;
}

async function measure(sdk: Sdk, neighbour: Sandbox): Promise<Phase> {
  const creates: number[] = [];
  const execs: number[] = [];
  let failed = 0;
  for (let i = 0; i < CREATES; i += 1) {
    const start = now();
    try {
      const sbx = await Sandbox.create('base', { ...sdk, timeoutMs: 120_000 });
      await sbx.commands.run('true');
      creates.push(now() - start);
      await sbx.kill();
    } catch {
      failed += 1;
    }
    for (let j = 0; j < EXECS / CREATES; j += 1) {
      const begin = now();
      await neighbour.commands.run('true');
      execs.push(now() - begin);
    }
  }
  return { creates, failed, execs, load: loadavg()[0]! };
}

/** Processes in the sandbox's container, as its pids cgroup counts them (read from outside: at its limit nothing starts inside). */
async function processCount(sandboxId: string): Promise<number> {
  const id = (await docker(['ps', '-q', '--filter', `label=${SANDBOX_LABEL}=${sandboxId}`])).trim();
  return Number((await docker(['stats', '--no-stream', '--format', '{{.PIDs}}', id])).trim());
}

async function withNoisy(sdk: Sdk, script: string, ready: (noisy: Sandbox) => Promise<void>, work: () => Promise<Phase>): Promise<Phase> {
  const noisy = await Sandbox.create('base', { ...sdk, timeoutMs: 600_000 });
  try {
    await noisy.commands.run(script, { background: true, timeoutMs: 0 });
    await ready(noisy);
    return await work();
  } finally {
    await Sandbox.kill(noisy.sandboxId, sdk);
  }
}

export async function benchNeighbours(log: Log): Promise<Row[]> {
  const platform = await startPlatformForBench();
  const sdk: Sdk = { apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url, requestTimeoutMs: 120_000 };
  let neighbour: Sandbox | undefined;
  try {
    const idle = await Sandbox.create('base', { ...sdk, timeoutMs: 1_800_000 });
    neighbour = idle;
    // Warm-up: the first create pays for lazy initialisation on both sides.
    await Sandbox.kill((await Sandbox.create('base', sdk)).sandboxId, sdk);
    log(`neighbours: quiet, ${CREATES} cold creates`);
    const quietBefore = await measure(sdk, idle);

    log('neighbours: a fork bomb in one sandbox');
    let peak = 0;
    const bomb = await withNoisy(
      sdk,
      'bomb() { bomb & bomb & wait; }; bomb',
      async (noisy) => {
        const deadline = Date.now() + 120_000;
        while (Date.now() < deadline && peak < 1000) {
          peak = Math.max(peak, await processCount(noisy.sandboxId));
          await new Promise((r) => setTimeout(r, 500));
        }
        log(`neighbours: the bombed sandbox reached ${peak} processes`);
      },
      () => measure(sdk, idle),
    );

    log('neighbours: one sandbox filling its memory');
    const memory = await withNoisy(sdk, 'while true; do tail /dev/zero; done', () => new Promise((r) => setTimeout(r, 3_000)), () => measure(sdk, idle));

    log(`neighbours: quiet again`);
    const quietAfter = await measure(sdk, idle);
    const quiet: Phase = {
      creates: [...quietBefore.creates, ...quietAfter.creates],
      failed: quietBefore.failed + quietAfter.failed,
      execs: [...quietBefore.execs, ...quietAfter.execs],
      load: (quietBefore.load + quietAfter.load) / 2,
    };
    const p = (xs: number[]): string => `${ms(percentile(xs, 50))} / ${ms(percentile(xs, 99))}`;
    const quietP50 = percentile(quiet.creates, 50);
    const row = (label: string, phase: Phase): Row[] => {
      const ratio = percentile(phase.creates, 50) / quietP50;
      return [
        {
          metric: `neighbours: cold create→first command p50 / p99 while ${label} (${phase.creates.length} of ${CREATES} created; load ${phase.load.toFixed(1)})`,
          tidepool: `${p(phase.creates)} (${ratio.toFixed(2)}×)`,
          baseline: `${p(quiet.creates)} quiet (${quiet.creates.length} of ${2 * CREATES} created; load ${quiet.load.toFixed(1)})`,
          target: `p50 ≤ ${BOUND}× quiet, no more failures`,
          verdict: ratio <= BOUND && phase.failed <= quiet.failed ? 'PASS' : 'FAIL',
        },
        { metric: `neighbours: commands.run('true') in an idle neighbour p50 / p99 while ${label}`, tidepool: p(phase.execs), baseline: `${p(quiet.execs)} quiet`, target: '', verdict: 'info' },
      ];
    };
    return [...row(`one sandbox fork-bombs (${peak} processes)`, bomb), ...row('one sandbox fills its memory (OOM-killed, again)', memory)];
  } finally {
    if (neighbour) await Sandbox.kill(neighbour.sandboxId, sdk).catch(() => undefined);
    await platform.close();
  }
}
