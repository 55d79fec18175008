/**
 * Cold starts per OCI runtime (BENCH_SECTIONS=runtimes): Sandbox.create → first commands.run('true'), serially,
 * with no warm pool, against two API processes that differ only in TIDEPOOL_CONTAINER_RUNTIME (runc, crun), beside
 * `docker run -d` → envd /health of the same image under the engine's default runtime (runc) and under crun. The
 * four are interleaved round by round (BENCH_RUNTIME_ROUNDS, default 30), so load on the shared machine hits each
 * alike. Target: the platform under the runtime `auto` picks, p50 ≤ 0.9× `docker run` → healthy.
 * Without crun registered with the engine only the runc rows are measured. Beside them, the CPU each runtime spends
 * per container (runtime-cpu.ts; BENCH_RUNTIME_CPU_RUNS, 50), which load on the machine hardly changes.
 */
import { Sandbox } from 'e2b';
import { startApiProcess, type ApiProcess } from './api-process.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { docker, dockerRunToHealthy } from './docker-baseline.ts';
import { networkNamespaceStarts } from './network-namespace-start.ts';
import { runtimeCpuPerRun } from './runtime-cpu.ts';

const ROUNDS = Number(process.env.BENCH_RUNTIME_ROUNDS ?? 30);
const CPU_RUNS = Number(process.env.BENCH_RUNTIME_CPU_RUNS ?? 50);
const NETNS_ROUNDS = Number(process.env.BENCH_RUNTIME_NETNS_ROUNDS ?? 10);
const TARGET_RATIO = 0.9;

interface Leg {
  name: string;
  samples: number[];
  once(): Promise<void>;
}

/** One measured run of the leg; a failed one is counted (and logged), not fatal: the other legs go on. */
async function attempt(leg: Leg, failures: Map<string, number>, log: (m: string) => void): Promise<void> {
  try {
    await leg.once();
  } catch (error) {
    failures.set(leg.name, (failures.get(leg.name) ?? 0) + 1);
    log(`runtimes: ${leg.name} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Create→first command against one API process; the sandbox is killed outside the timing. */
function platformLeg(name: string, api: ApiProcess): Leg {
  const opts = { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 60_000 };
  const samples: number[] = [];
  return {
    name,
    samples,
    async once() {
      const start = now();
      const sbx = await Sandbox.create(opts);
      try {
        await sbx.commands.run('true');
        samples.push(now() - start);
      } finally {
        await sbx.kill().catch(() => undefined);
      }
    },
  };
}

function dockerLeg(name: string, image: string, network: string | undefined, runtime: string | undefined): Leg {
  const samples: number[] = [];
  return {
    name,
    samples,
    async once() {
      samples.push((await dockerRunToHealthy(image, network, runtime)).healthyMs);
    },
  };
}

export async function benchColdRuntimes(image: string, network: string | undefined, log: (m: string) => void): Promise<Row[]> {
  const runtimes = (await docker(['info', '--format', '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}'])).split(/\s+/).filter(Boolean);
  const withCrun = runtimes.includes('crun');
  if (!withCrun) log('runtimes: the engine has no crun registered (bash scripts/ensure-docker.sh as root registers an installed crun): runc only');
  const apis: ApiProcess[] = [];
  try {
    const legs: Leg[] = [];
    for (const runtime of withCrun ? ['runc', 'crun'] : ['runc']) {
      const api = await startApiProcess({ TIDEPOOL_CONTAINER_RUNTIME: runtime });
      apis.push(api);
      legs.push(platformLeg(`platform (${runtime})`, api));
    }
    legs.push(dockerLeg('docker run (runc)', image, network, undefined));
    if (withCrun) legs.push(dockerLeg('docker run --runtime crun', image, network, 'crun'));
    log(`runtimes: cold create→first command under ${legs.map((l) => l.name).join(', ')}, interleaved ×${ROUNDS}`);
    const failures = new Map<string, number>();
    // One unmeasured round: first-call costs (JIT, SQLite, the engine's caches) on every side.
    for (const leg of legs) await attempt(leg, failures, log);
    for (const leg of legs) leg.samples.length = 0;
    failures.clear();
    for (let round = 0; round < ROUNDS; round += 1) {
      // Rotate the order each round: no leg always runs right after another's container removal.
      for (let i = 0; i < legs.length; i += 1) await attempt(legs[(round + i) % legs.length]!, failures, log);
    }
    const p = (leg: Leg, q: number): number => percentile(leg.samples, q);
    const baseline = legs.find((l) => l.name === 'docker run (runc)')!;
    const chosen = legs.find((l) => l.name === `platform (${withCrun ? 'crun' : 'runc'})`)!;
    const base50 = p(baseline, 50);
    const rows: Row[] = legs
      .filter((leg) => leg !== baseline)
      .map((leg) => ({
        metric: `cold ${leg.name.startsWith('platform') ? 'create→first command' : 'run→envd healthy'} p50 / p99, ${leg.name} (serial, ${leg.samples.length} of ${ROUNDS} ok)`,
        tidepool: `${ms(p(leg, 50))} / ${ms(p(leg, 99))} (${(p(leg, 50) / base50).toFixed(2)}×)`,
        baseline: `${ms(base50)} / ${ms(p(baseline, 99))} docker run (runc) → envd healthy (${baseline.samples.length} of ${ROUNDS} ok)`,
        target: leg === chosen ? `p50 ≤ ${TARGET_RATIO}× baseline` : '',
        verdict: leg === chosen ? (p(leg, 50) <= TARGET_RATIO * base50 ? 'PASS' : 'FAIL') : 'info',
      }));
    if (withCrun && process.getuid?.() === 0) {
      log(`runtimes: CPU per container, runc run / crun run of /bin/true ×${CPU_RUNS}`);
      const [runc, crun] = await runtimeCpuPerRun(image, ['runc', 'crun'], CPU_RUNS);
      rows.push({ metric: `runtime CPU per container (user+sys of \`<runtime> run\`, /bin/true, n=${CPU_RUNS})`, tidepool: `${ms(crun!)} crun`, baseline: `${ms(runc!)} runc`, target: '', verdict: 'info' });
    }
    if (network) {
      const mode = withCrun ? 'crun' : undefined;
      log(`runtimes: docker start of a sleep container on ${network}, with --network none, and joining a running container's namespace, interleaved ×${NETNS_ROUNDS}`);
      const starts = await networkNamespaceStarts(image, network, mode, NETNS_ROUNDS);
      rows.push({
        metric: `engine start (\`docker start\`, ${mode ?? 'default runtime'}, a sleep container, n=${NETNS_ROUNDS}): on ${network} / --network none / joining an existing namespace`,
        tidepool: `${ms(starts.sandboxNetwork)} / ${ms(starts.none)} / ${ms(starts.joined)}`,
        baseline: `making the network namespace: ${ms(starts.sandboxNetwork - starts.joined)} of every start, the platform's and docker run's alike`,
        target: '',
        verdict: 'info',
      });
      rows.push({
        metric: `docker run → envd healthy joined to a network namespace made ahead (\`--network container:<holder>\`, ${mode ?? 'default runtime'}, n=${NETNS_ROUNDS})`,
        tidepool: `${ms(starts.healthyJoined)} (${(starts.healthyJoined / base50).toFixed(2)}× the docker run (runc) baseline above)`,
        baseline: `${ms(starts.healthyOnNetwork)} the same on ${network} (in these rounds)`,
        target: '',
        verdict: 'info',
      });
    }
    return rows;
  } finally {
    for (const api of apis) await api.stop();
  }
}
