/**
 * pnpm bench:platform — the platform measured with the real e2b SDK, each number beside a Docker baseline taken
 * in the same run on the same machine:
 *
 *   create→ready      Sandbox.create → first commands.run('true'), serially (≥ 30)   vs docker run -d → envd /health
 *   concurrency 10    the same at concurrency 10 (≥ 50), success count
 *   pause / resume    sbx.pause() / Sandbox.connect() of a paused sandbox              vs docker pause / unpause
 *   proxy overhead    GET /health through the API's proxy vs straight to the container IP
 *
 *   templates         cached rebuild, snapshot, create from a snapshot, 150 steps (template-bench.ts)
 *   pool              warm pool: serial and concurrent create→first command from the pool, cold beside it (pool-bench.ts)
 *
 * Sizes: BENCH_SERIAL (30), BENCH_CONCURRENT (50), BENCH_CONCURRENCY (10), BENCH_PAUSE (10), BENCH_PROXY (1000).
 * BENCH_SECTIONS: comma list of `sandboxes`, `templates`, `pool` (default all).
 */
import { Sandbox } from 'e2b';
import { ensureBaseImage } from '@tidepool/testkit';
import { ms, now, percentile, printTable, timed, type Row } from './bench-stats.ts';
import { dockerPauseBaseline, dockerRunBaseline, httpGet } from './docker-baseline.ts';
import { startPlatformForBench } from './platform-adapter.ts';
import { benchTemplates } from './template-bench.ts';
import { benchPool } from './pool-bench.ts';

const SERIAL = Number(process.env.BENCH_SERIAL ?? 30);
const CONCURRENT = Number(process.env.BENCH_CONCURRENT ?? 50);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
const PAUSES = Number(process.env.BENCH_PAUSE ?? 10);
const PROXY_REQUESTS = Number(process.env.BENCH_PROXY ?? 1000);
const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'sandboxes,templates,pool').split(',').map((s) => s.trim()));

const log = (message: string): void => console.error(`[bench] ${message}`);

async function main(): Promise<void> {
  log('building images if needed');
  const image = await ensureBaseImage();
  log('starting the platform in-process');
  const platform = await startPlatformForBench();
  const opts = { apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url, requestTimeoutMs: 60_000 };
  const rows: Row[] = [];
  try {
    // Warm-up: first create pays for lazy initialisation on both sides.
    {
      const sbx = await Sandbox.create(opts);
      await sbx.commands.run('true');
      await sbx.kill();
    }

    if (SECTIONS.has('templates')) rows.push(...(await benchTemplates(opts, image, log)));
    if (SECTIONS.has('pool')) rows.push(...(await benchPool(image, platform.network, log)));
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
      target: `≤ 1.2× baseline (${ms(1.2 * baseHealthy)})`,
      verdict: serialP50 <= 1.2 * baseHealthy ? 'PASS' : 'FAIL',
    });
    rows.push({
      metric: 'create→first command p99 (serial)',
      tidepool: ms(percentile(serial, 99)),
      baseline: `${ms(percentile(runs.map((r) => r.healthyMs), 99))} run→healthy p99`,
      target: '',
      verdict: 'info',
    });
    rows.push({ metric: 'docker run -d return p50', tidepool: '', baseline: ms(baseRun), target: '', verdict: 'info' });

    // -- create → ready, concurrent ---------------------------------------------------------------------------
    log(`create→ready ×${CONCURRENT} at concurrency ${CONCURRENCY}`);
    const concurrent: number[] = [];
    const failures: string[] = [];
    let next = 0;
    const wallStart = now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < CONCURRENT) {
          next += 1;
          const start = now();
          let sbx: Sandbox | undefined;
          try {
            sbx = await Sandbox.create(opts);
            const result = await sbx.commands.run('true');
            if (result.exitCode !== 0) throw new Error(`exit ${result.exitCode}`);
            concurrent.push(now() - start);
          } catch (err) {
            failures.push((err as Error).message);
          } finally {
            await sbx?.kill().catch(() => undefined);
          }
        }
      }),
    );
    const wall = now() - wallStart;
    rows.push({
      metric: `create→first command p50 / p99 (c=${CONCURRENCY}, n=${CONCURRENT})`,
      tidepool: `${ms(percentile(concurrent, 50))} / ${ms(percentile(concurrent, 99))}`,
      baseline: '',
      target: '',
      verdict: 'info',
    });
    rows.push({
      metric: `success at concurrency ${CONCURRENCY}`,
      tidepool: `${concurrent.length}/${CONCURRENT} (${((CONCURRENT / wall) * 1000).toFixed(1)} sandboxes/s)`,
      baseline: '',
      target: '100%',
      verdict: concurrent.length === CONCURRENT ? 'PASS' : 'FAIL',
    });
    if (failures.length > 0) log(`concurrent failures: ${[...new Set(failures)].slice(0, 5).join(' | ')}`);

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
