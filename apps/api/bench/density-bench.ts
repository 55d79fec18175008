/**
 * Density (BENCH_SECTIONS=density; minutes): how many idle sandboxes the machine holds and what each costs.
 *
 *   The API runs as its own process (api-process.ts: its RSS is its own) with the default sandbox limit (raised only
 *   when BENCH_DENSITY asks for more). BENCH_DENSITY (500) sandboxes are created through the e2b SDK
 *   (BENCH_DENSITY_CONCURRENCY at once), left idle, then measured:
 *     per sandbox   its memory cgroup (usage, anon, file), envd's VmRSS and Pss, the Pss of all its processes
 *     host          MemAvailable drop per sandbox, CPU the idle sandboxes use together (their cgroups)
 *     API           VmRSS with one sandbox and with all of them
 *     responsive    GET /sandboxes and commands.run('true') on a random sandbox, p50/p99, with one and with all up
 *   then every sandbox is killed through the SDK and the engine is checked for leftovers.
 *   Baseline: BENCH_DENSITY_BASELINE (30) idle `docker run` containers of the same image running tini + sleep.
 *
 * SIGINT/SIGTERM during the run kill the API and remove every container of its platform and of the baseline
 * (by label), so an interrupted run leaves nothing behind.
 */
import { loadavg, totalmem } from 'node:os';
import { Sandbox } from 'e2b';
import { defaultMaxSandboxes } from '../src/sandboxes/sandbox-settings.ts';
import { type ApiProcess, startApiProcess } from './api-process.ts';
import { atConcurrency, ms, now, percentile, type Row } from './bench-stats.ts';
import { idleCpuPercent } from './container-cpu.ts';
import { type ContainerMemory, mb, memAvailableBytes, readContainerMemory } from './container-memory.ts';
import { removeLabelled, startIdleContainers } from './docker-baseline.ts';

const COUNT = Number(process.env.BENCH_DENSITY ?? 500);
const CONCURRENCY = Number(process.env.BENCH_DENSITY_CONCURRENCY ?? 6);
const PROBES = Number(process.env.BENCH_DENSITY_PROBES ?? 100);
const BASELINE_COUNT = Math.min(COUNT, Number(process.env.BENCH_DENSITY_BASELINE ?? 30));
const SETTLE_MS = Number(process.env.BENCH_DENSITY_SETTLE_MS ?? 20_000);
const TARGET_BYTES = 40e6;
const RESPONSIVE_P99_MS = 250;
const TARGET_COUNT = 500;
const HOST_DROP_TARGET_BYTES = 25e6;

type Log = (message: string) => void;
const sleep = (msec: number): Promise<void> => new Promise((r) => setTimeout(r, msec));
const median = (values: number[]): number => percentile(values, 50);
/** The machine is shared: what else ran shows in the load average (1, 5, 15 min). */
const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' / ');

interface Probes {
  list: number[];
  run: number[];
  failures: string[];
}

/** GET /sandboxes and commands.run('true') on a random sandbox, alternately, `count` of each. */
async function probe(api: ApiProcess, sandboxes: Sandbox[], count: number): Promise<Probes> {
  const result: Probes = { list: [], run: [], failures: [] };
  for (let i = 0; i < count; i += 1) {
    try {
      let start = now();
      const response = await fetch(`${api.url}/sandboxes`, { headers: { 'X-API-Key': api.apiKey } });
      const listed = (await response.json()) as unknown[];
      if (response.status !== 200 || listed.length < sandboxes.length) throw new Error(`GET /sandboxes answered ${response.status} with ${listed.length} sandboxes`);
      result.list.push(now() - start);
      const sbx = sandboxes[Math.floor(Math.random() * sandboxes.length)]!;
      start = now();
      const ran = await sbx.commands.run('true');
      if (ran.exitCode !== 0) throw new Error(`exit ${ran.exitCode}`);
      result.run.push(now() - start);
    } catch (error) {
      result.failures.push((error as Error).message);
    }
  }
  return result;
}

/** Creates `count` sandboxes at `concurrency`, logging progress; failures are counted, not thrown. */
async function createMany(api: ApiProcess, count: number, concurrency: number, log: Log): Promise<{ created: Sandbox[]; failures: string[]; seconds: number }> {
  const opts = { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 120_000, timeoutMs: 3_600_000 };
  const created: Sandbox[] = [];
  const failures: string[] = [];
  const start = now();
  await atConcurrency(count, concurrency, async () => {
    try {
      const sbx = await Sandbox.create('base', opts);
      created.push(sbx);
      if (created.length % 25 === 0) log(`density: ${created.length}/${count} sandboxes up (${((created.length / (now() - start)) * 1000).toFixed(1)}/s)`);
    } catch (error) {
      failures.push((error as Error).message);
    }
  });
  return { created, failures, seconds: (now() - start) / 1000 };
}

interface MemorySummary {
  usage: number;
  anon: number;
  file: number;
  /** Pss of every process in the container. */
  pss: number;
  envdRss: number;
  envdPss: number;
}

function summarize(samples: ContainerMemory[]): MemorySummary {
  const envd = samples.map((s) => s.processes.find((p) => p.comm === 'node'));
  return {
    usage: median(samples.map((s) => s.cgroup.usageBytes)),
    anon: median(samples.map((s) => s.cgroup.anonBytes)),
    file: median(samples.map((s) => s.cgroup.fileBytes)),
    pss: median(samples.map((s) => s.processes.reduce((sum, p) => sum + p.pssBytes, 0))),
    envdRss: median(envd.map((p) => p?.rssBytes ?? Number.NaN).filter(Number.isFinite)),
    envdPss: median(envd.map((p) => p?.pssBytes ?? Number.NaN).filter(Number.isFinite)),
  };
}

/** Idle tini + sleep containers: their cgroup memory, Pss, the host MemAvailable drop each causes, idle CPU. */
async function baseline(image: string, log: Log): Promise<{ memory: MemorySummary; hostDrop: number; cpu: number }> {
  const label = `density-${process.pid}`;
  log(`density baseline: ${BASELINE_COUNT} idle docker run containers (tini + sleep)`);
  const availBefore = memAvailableBytes();
  const ids = await startIdleContainers(image, BASELINE_COUNT, label);
  try {
    await sleep(SETTLE_MS / 2);
    const hostDrop = (availBefore - memAvailableBytes()) / ids.length;
    const memory = summarize(ids.map(readContainerMemory));
    const cpu = await idleCpuPercent(ids, 10_000);
    return { memory, hostDrop, cpu };
  } finally {
    await removeLabelled(label);
  }
}

export async function benchDensity(image: string, log: Log): Promise<Row[]> {
  const rows: Row[] = [];
  let api: ApiProcess | undefined;
  // From the first container on: an interrupted run removes everything it started, by label.
  const interrupted = (signal: NodeJS.Signals): void => {
    log(`density: ${signal}: killing the API and removing the containers of this run`);
    api?.killNow();
    void Promise.all([api?.removeContainers() ?? 0, removeLabelled(`density-${process.pid}`)]).then(([a, b]) => {
      log(`density: removed ${a + b} containers`);
      process.exit(130);
    });
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  let sandboxes: Sandbox[] = [];
  try {
    const loadBefore = load();
    log(`density: before the run: MemAvailable ${mb(memAvailableBytes())} of ${mb(totalmem())}, load average ${loadBefore}`);
    const base = await baseline(image, log);
    const limit = defaultMaxSandboxes(totalmem());
    const settings: Record<string, string> = COUNT + 10 > limit ? { TIDEPOOL_MAX_SANDBOXES: String(COUNT + 10) } : {};
    log(`density: starting the API as its own process (TIDEPOOL_MAX_SANDBOXES ${settings.TIDEPOOL_MAX_SANDBOXES ?? `default, ${limit}`})`);
    api = await startApiProcess(settings);

    // One sandbox first: the "before" of every comparison.
    const first = await createMany(api, 1, 1, log);
    if (first.created.length !== 1) throw new Error(`the first sandbox failed: ${first.failures.join(' | ')}`);
    sandboxes = first.created;
    await sleep(5_000);
    const oneProbes = await probe(api, sandboxes, PROBES);
    const apiRssOne = api.rssBytes();
    const availOne = memAvailableBytes();

    log(`density: creating ${COUNT - 1} more sandboxes at concurrency ${CONCURRENCY}`);
    const rest = await createMany(api, COUNT - 1, CONCURRENCY, log);
    sandboxes = [...sandboxes, ...rest.created];
    if (rest.failures.length > 0) log(`density: create failures: ${[...new Set(rest.failures)].slice(0, 5).join(' | ')}`);
    log(`density: ${sandboxes.length} sandboxes up in ${rest.seconds.toFixed(0)} s; idle for ${SETTLE_MS / 1000} s`);
    await sleep(SETTLE_MS);

    const containers = await api.containers();
    const hostDrop = (availOne - memAvailableBytes()) / Math.max(1, sandboxes.length - 1);
    const memory = summarize(containers.map(readContainerMemory));
    const cpu = await idleCpuPercent(containers, 10_000);
    const apiRssAll = api.rssBytes();
    const loadIdle = load();
    log(`density: probing the API with ${sandboxes.length} sandboxes up`);
    const allProbes = await probe(api, sandboxes, PROBES);

    const n = sandboxes.length;
    const vs = (value: number, baselineValue: number): Pick<Row, 'tidepool' | 'baseline'> => ({ tidepool: mb(value), baseline: `${mb(baselineValue)} tini+sleep container` });
    rows.push({ metric: `idle sandbox: Pss of its processes (median of ${n}, shared pages ÷ sharers)`, ...vs(memory.pss, base.memory.pss), target: '≤ 40 MB', verdict: memory.pss <= TARGET_BYTES ? 'PASS' : 'FAIL' });
    rows.push({ metric: 'idle sandbox: cgroup memory usage (median; anon / file)', tidepool: `${mb(memory.usage)} (${mb(memory.anon)} / ${mb(memory.file)})`, baseline: `${mb(base.memory.usage)} (${mb(base.memory.anon)} / ${mb(base.memory.file)})`, target: '≤ 40 MB', verdict: memory.usage <= TARGET_BYTES ? 'PASS' : 'FAIL' });
    rows.push({ metric: 'idle envd: VmRSS / Pss (median)', tidepool: `${mb(memory.envdRss)} / ${mb(memory.envdPss)}`, baseline: '', target: '', verdict: 'info' });
    rows.push({ metric: 'host MemAvailable drop per sandbox', ...vs(hostDrop, base.hostDrop), target: '≤ 25 MB', verdict: hostDrop <= HOST_DROP_TARGET_BYTES ? 'PASS' : 'FAIL' });
    rows.push({ metric: `CPU of ${n} idle sandboxes together (% of one core)`, tidepool: `${cpu.toFixed(1)} %`, baseline: `${((base.cpu / BASELINE_COUNT) * n).toFixed(2)} % (${BASELINE_COUNT} containers ×${(n / BASELINE_COUNT).toFixed(1)})`, target: '', verdict: 'info' });
    rows.push({ metric: `API VmRSS with ${n} sandboxes`, tidepool: mb(apiRssAll), baseline: `${mb(apiRssOne)} with 1`, target: '', verdict: 'info' });
    const responsive = allProbes.failures.length === 0 && percentile(allProbes.list, 99) <= RESPONSIVE_P99_MS && percentile(allProbes.run, 99) <= RESPONSIVE_P99_MS;
    rows.push({
      metric: `idle sandboxes held (asked ${COUNT}, ${rest.failures.length + first.failures.length} failed; created in ${rest.seconds.toFixed(0)} s)`,
      tidepool: String(n),
      baseline: '',
      target: `≥ ${TARGET_COUNT}, API responsive (p99 ≤ ${RESPONSIVE_P99_MS} ms)`,
      verdict: n >= TARGET_COUNT && responsive ? 'PASS' : 'FAIL',
    });
    rows.push({ metric: 'load average (1 / 5 / 15 min) with all idle; before the run', tidepool: loadIdle, baseline: loadBefore, target: '', verdict: 'info' });
    const p = (xs: number[]): string => `${ms(percentile(xs, 50))} / ${ms(percentile(xs, 99))}`;
    rows.push({ metric: `GET /sandboxes p50 / p99 with ${n} up (n=${PROBES})`, tidepool: p(allProbes.list), baseline: `${p(oneProbes.list)} with 1`, target: `p99 ≤ ${RESPONSIVE_P99_MS} ms`, verdict: percentile(allProbes.list, 99) <= RESPONSIVE_P99_MS ? 'PASS' : 'FAIL' });
    rows.push({ metric: `commands.run('true') p50 / p99 with ${n} up (random sandbox)`, tidepool: p(allProbes.run), baseline: `${p(oneProbes.run)} with 1`, target: `p99 ≤ ${RESPONSIVE_P99_MS} ms`, verdict: percentile(allProbes.run, 99) <= RESPONSIVE_P99_MS ? 'PASS' : 'FAIL' });
    if (allProbes.failures.length > 0) log(`density: probe failures: ${[...new Set(allProbes.failures)].slice(0, 5).join(' | ')}`);

    log(`density: killing ${n} sandboxes`);
    const killStart = now();
    await atConcurrency(sandboxes.length, CONCURRENCY, async (i) => {
      const sbx = sandboxes[i]!;
      await sbx.kill().catch((error: unknown) => log(`density: kill ${sbx.sandboxId}: ${(error as Error).message}`));
    });
    const killSeconds = (now() - killStart) / 1000;
    const left = await api.containers();
    rows.push({ metric: `containers left after killing all ${n} (${killSeconds.toFixed(0)} s)`, tidepool: String(left.length), baseline: '', target: '0', verdict: left.length === 0 ? 'PASS' : 'FAIL' });
    sandboxes = [];
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    if (api) {
      await api.stop();
      const removed = await api.removeContainers();
      if (removed > 0) log(`density: removed ${removed} containers the API left`);
    }
  }
  return rows;
}
