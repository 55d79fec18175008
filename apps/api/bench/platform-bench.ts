/**
 * pnpm bench:platform — the platform measured with the real e2b SDK, each number beside a Docker baseline taken
 * in the same run on the same machine:
 *
 *   sandboxes   create→ready cold: Sandbox.create → first commands.run('true'), serially (≥ 30)   vs docker run -d → envd /health
 *               cold at concurrency 20 and 50 (concurrency-bench.ts)                   vs that many docker runs at once
 *               exec: commands.run('true') through the proxy (exec-bench.ts)          vs docker exec, bash -l -c true in it, the SDK floor
 *   exec        that exec figure alone, with its breakdown (proxy, envd + shell, CPU per call) and an optional
 *               before/after A/B in the same run (exec-bench.ts; BENCH_EXEC_BEFORE_DIR, BENCH_EXEC_BEFORE_IMAGE)
 *   proxy-hop   the proxy alone on that path: the SDK to an instant Start server straight and through one proxy hop,
 *               no container (proxy-hop-bench.ts; BENCH_PROXY_BEFORE_DIR for an A/B)
 *               pause / resume: sbx.pause() / Sandbox.connect() of a paused sandbox    vs docker pause / unpause
 *               proxy overhead: GET /health through the API's proxy                     vs straight to the container IP
 *   templates   cached rebuild, snapshot, create from a snapshot, 150 steps (template-bench.ts)
 *   pool        warm pool: serial and c=20/c=50 bursts of create→first command, cold beside it (pool-bench.ts)
 *   pool-adaptive  the default adaptive pool: a c=20 burst from the floor, then a second one after it grew (pool-adaptive-bench.ts)
 *   runtimes    cold create→first command with runc and with crun (two API processes), interleaved with docker run →
 *               envd healthy under each (runtime-bench.ts; BENCH_RUNTIME_ROUNDS, 30)
 *   density     500 idle sandboxes: memory per sandbox, API RSS, responsiveness (density-bench.ts; minutes)
 *   neighbours  cold creates and an idle neighbour's commands while one sandbox fork-bombs or fills its memory,
 *               beside the same quiet (neighbour-bench.ts; ~3 min)
 *   burst       c=20 and c=50 from pinned pools with the platform in its own process: its CPU per create, p50/p99, an
 *               optional A/B against another checkout and CPU profiles of the bursts (burst-ab-bench.ts; BENCH_BURST_*)
 *   code-interpreter  runCode('1+1') warm beside commands.run('python3 -c …'), create→first runCode from a warm
 *               pool of code-interpreter-v1 (code-interpreter-bench.ts; BENCH_CI_RUNS, BENCH_CI_CREATES, BENCH_CI_POOL)
 *   desktop     `@e2b/desktop` create→first screenshot cold and from a warm pool, idle desktop sandbox memory
 *               (desktop-bench.ts; BENCH_DESKTOP_CREATES, BENCH_DESKTOP_POOL)
 *
 * Sizes: BENCH_SERIAL (30), BENCH_CONCURRENT (50), BENCH_CONCURRENCY (20,50), BENCH_EXEC (200), BENCH_PAUSE (10),
 * BENCH_PROXY (1000), BENCH_POOL_CONCURRENCY (20,50), BENCH_DENSITY (500).
 * BENCH_SECTIONS: comma list of `sandboxes`, `exec`, `proxy-hop`, `runtimes`, `templates`, `pool`, `pool-adaptive`, `density`, `neighbours`, `code-interpreter`, `desktop`, `burst`, `placement`
 * (placement-bench.ts: a placement decision over 1,000 sandboxes; pure, no engine), `cluster` (cluster-bench.ts: c=50
 * creates through the SDK on a three-node local cluster vs one node of it; root; BENCH_CLUSTER_CREATES,
 * BENCH_CLUSTER_CONCURRENCY), `node-hop` (node-hop-bench.ts: create→first command, then envd /health and commands.run
 * through the proxy, to a sandbox on the API's embedded node vs one on a local cluster's agent, interleaved, with the
 * node-channel calls and tunnels per remote create from the agent's metrics; root; BENCH_NODE_HOP_CREATES,
 * BENCH_NODE_HOP_REQUESTS, BENCH_NODE_HOP_COMMANDS), `images` (images-bench.ts: the production images' sizes and the node-agent image's start
 * on a one-node local cluster; root; BENCH_IMAGES_STARTS) (default
 * `sandboxes,runtimes,templates,pool,pool-adaptive`).
 */
import { Sandbox } from 'e2b';
import { ensureBaseImage } from '@tidepool/testkit';
import { ms, now, percentile, printTable, timed, type Row } from './bench-stats.ts';
import { dockerPauseBaseline, dockerRunBaseline, httpGet } from './docker-baseline.ts';
import { startPlatformForBench } from './platform-adapter.ts';
import { benchTemplates } from './template-bench.ts';
import { benchPool } from './pool-bench.ts';
import { benchPoolAdaptive } from './pool-adaptive-bench.ts';
import { benchColdConcurrency } from './concurrency-bench.ts';
import { benchExec } from './exec-bench.ts';
import { benchProxyHop } from './proxy-hop-bench.ts';
import { benchDensity } from './density-bench.ts';
import { benchCodeInterpreter } from './code-interpreter-bench.ts';
import { benchDesktop } from './desktop-bench.ts';
import { benchPlacement } from './placement-bench.ts';
import { benchNeighbours } from './neighbour-bench.ts';
import { benchCluster } from './cluster-bench.ts';
import { benchNodeHop } from './node-hop-bench.ts';
import { benchColdRuntimes } from './runtime-bench.ts';
import { benchBurstAb } from './burst-ab-bench.ts';
import { benchImages } from './images-bench.ts';
import { loadConfig } from '../src/config.ts';

const SERIAL = Number(process.env.BENCH_SERIAL ?? 30);
const PAUSES = Number(process.env.BENCH_PAUSE ?? 10);
const PROXY_REQUESTS = Number(process.env.BENCH_PROXY ?? 1000);
const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'sandboxes,runtimes,templates,pool,pool-adaptive').split(',').map((s) => s.trim()));

const log = (message: string): void => console.error(`[bench] ${message}`);

async function main(): Promise<void> {
  let image = '';
  // Sections that need no container do not wait for an image build.
  if (![...SECTIONS].every((name) => name === 'placement' || name === 'proxy-hop' || name === 'images')) {
    log('building images if needed');
    image = await ensureBaseImage();
  }
  const rows: Row[] = [];
  if (SECTIONS.has('density')) {
    try {
      rows.push(...(await benchDensity(image, log)));
    } finally {
      if (SECTIONS.size === 1) printTable(rows);
    }
    if (SECTIONS.size === 1) {
      if (rows.some((r) => r.verdict === 'FAIL')) process.exitCode = 1;
      return;
    }
  }
  // Sections that start their own API process, printed alone when nothing else was asked for.
  const ownProcess: Array<[string, () => Promise<Row[]>]> = [
    ['exec', () => benchExec(log)],
    ['proxy-hop', () => benchProxyHop(log)],
    ['code-interpreter', () => benchCodeInterpreter(log)],
    ['desktop', () => benchDesktop(log)],
    ['placement', async () => benchPlacement(log)],
    ['neighbours', () => benchNeighbours(log)],
    ['cluster', () => benchCluster(log)],
    ['node-hop', () => benchNodeHop(log)],
    ['runtimes', () => benchColdRuntimes(image, loadConfig(process.env).sandboxNetwork, log)],
    ['burst', () => benchBurstAb(log)],
    ['images', () => benchImages(log)],
  ];
  for (const [name, bench] of ownProcess) {
    if (!SECTIONS.has(name)) continue;
    rows.push(...(await bench()));
    SECTIONS.delete(name);
  }
  if ([...SECTIONS].every((name) => name === 'density')) {
    printTable(rows);
    if (rows.some((r) => r.verdict === 'FAIL')) process.exitCode = 1;
    return;
  }
  log('starting the platform in-process');
  const platform = await startPlatformForBench();
  const opts = { apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url, requestTimeoutMs: 60_000 };
  try {
    // Warm-up: first create pays for lazy initialisation on both sides.
    {
      const sbx = await Sandbox.create(opts);
      await sbx.commands.run('true');
      await sbx.kill();
    }

    if (SECTIONS.has('templates')) rows.push(...(await benchTemplates(opts, image, log)));
    if (SECTIONS.has('pool')) rows.push(...(await benchPool(image, platform.network, log)));
    if (SECTIONS.has('pool-adaptive')) rows.push(...(await benchPoolAdaptive(log)));
    if (!SECTIONS.has('sandboxes')) return;

    // -- create → ready, serial --------------------------------------------------------------------------------
    log(`create→ready serial ×${SERIAL}`);
    const serial: number[] = [];
    for (let i = 0; i < SERIAL; i += 1) {
      const start = now();
      const sbx = await Sandbox.create(opts);
      await sbx.commands.run('true');
      serial.push(now() - start);
      await sbx.kill();
    }

    log(`docker run -d baseline ×${Math.min(SERIAL, 20)}`);
    const runs = await dockerRunBaseline(image, platform.network, Math.min(SERIAL, 20));
    const baseHealthy = percentile(runs.map((r) => r.healthyMs), 50);
    const baseRun = percentile(runs.map((r) => r.runMs), 50);
    const serialP50 = percentile(serial, 50);
    rows.push({
      metric: `create→first command p50 (serial, n=${SERIAL})`,
      tidepool: ms(serialP50),
      baseline: `${ms(baseHealthy)} run→envd healthy`,
      target: `≤ 1.0× baseline (${ms(baseHealthy)})`,
      verdict: serialP50 <= baseHealthy ? 'PASS' : 'FAIL',
    });
    rows.push({
      metric: 'create→first command p99 (serial)',
      tidepool: ms(percentile(serial, 99)),
      baseline: `${ms(percentile(runs.map((r) => r.healthyMs), 99))} run→healthy p99`,
      target: '',
      verdict: 'info',
    });
    rows.push({ metric: 'docker run -d return p50', tidepool: '', baseline: ms(baseRun), target: '', verdict: 'info' });

    // -- create → ready, concurrent; exec -------------------------------------------------------------------------
    rows.push(...(await benchColdConcurrency(opts, image, platform.network, log)));
    rows.push(...(await benchExec(log)));

    // -- pause / resume ----------------------------------------------------------------------------------------
    log(`pause/resume ×${PAUSES}`);
    const pauseMs: number[] = [];
    const resumeMs: number[] = [];
    const resumeToCommand: number[] = [];
    {
      const sbx = await Sandbox.create(opts);
      try {
        await sbx.commands.run('true');
        for (let i = 0; i < PAUSES; i += 1) {
          pauseMs.push((await timed(() => sbx.pause())).ms);
          const resumed = await timed(() => Sandbox.connect(sbx.sandboxId, opts));
          resumeMs.push(resumed.ms);
          resumeToCommand.push(resumed.ms + (await timed(() => resumed.value.commands.run('true'))).ms);
        }
      } finally {
        await sbx.kill().catch(() => undefined);
      }
    }
    log(`docker pause/unpause baseline ×${PAUSES}`);
    const dockerPauses = await dockerPauseBaseline(image, PAUSES);
    const pauseP50 = percentile(pauseMs, 50);
    const resumeP50 = percentile(resumeMs, 50);
    rows.push({
      metric: `pause p50 (n=${PAUSES})`,
      tidepool: ms(pauseP50),
      baseline: `${ms(percentile(dockerPauses.map((s) => s.pauseMs), 50))} docker pause`,
      target: '≤ 60 ms',
      verdict: pauseP50 <= 60 ? 'PASS' : 'FAIL',
    });
    rows.push({
      metric: `resume (connect) p50 (n=${PAUSES})`,
      tidepool: ms(resumeP50),
      baseline: `${ms(percentile(dockerPauses.map((s) => s.unpauseMs), 50))} docker unpause`,
      target: '≤ 60 ms',
      verdict: resumeP50 <= 60 ? 'PASS' : 'FAIL',
    });
    rows.push({ metric: 'resume→first command p50', tidepool: ms(percentile(resumeToCommand, 50)), baseline: '', target: '', verdict: 'info' });

    // -- proxy overhead ------------------------------------------------------------------------------------------
    log(`proxy overhead ×${PROXY_REQUESTS}`);
    {
      const sbx = await Sandbox.create(opts);
      try {
        const ip = (await sbx.commands.run('hostname -I')).stdout.trim().split(/\s+/)[0];
        const direct = `http://${ip}:49983/health`;
        const proxied = `${platform.url}/health`;
        const routing = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' };
        const d: number[] = [];
        const p: number[] = [];
        for (let i = 0; i < 100; i += 1) {
          await httpGet(direct);
          await httpGet(proxied, routing);
        }
        for (let i = 0; i < PROXY_REQUESTS; i += 1) {
          // Interleaved, so drift on the machine hits both sides alike.
          let start = now();
          const ds = await httpGet(direct);
          d.push(now() - start);
          start = now();
          const ps = await httpGet(proxied, routing);
          p.push(now() - start);
          if (ds >= 300 || ps >= 300) throw new Error(`health answered ${ds} direct / ${ps} proxied`);
        }
        const overhead = percentile(p, 50) - percentile(d, 50);
        rows.push({
          metric: `proxy overhead p50 (GET /health, n=${PROXY_REQUESTS})`,
          tidepool: `${ms(overhead)} (${ms(percentile(p, 50))} proxied)`,
          baseline: `${ms(percentile(d, 50))} direct to ${ip}`,
          target: '≤ 1 ms',
          verdict: overhead <= 1 ? 'PASS' : 'FAIL',
        });
        rows.push({
          metric: 'proxy p99 (proxied / direct)',
          tidepool: ms(percentile(p, 99)),
          baseline: ms(percentile(d, 99)),
          target: '',
          verdict: 'info',
        });
      } finally {
        await sbx.kill().catch(() => undefined);
      }
    }
  } finally {
    await platform.close();
    console.log('');
    printTable(rows);
  }
  if (rows.some((r) => r.verdict === 'FAIL')) process.exitCode = 1;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
