/**
 * The `desktop` template, measured with the published `@e2b/desktop` SDK against the API in its own process (as
 * `npm start` runs it):
 *
 *   create → first screenshot, cold    Sandbox.create() (which starts Xvfb and the xfce4 session and waits for
 *                                      them) → the first screenshot() PNG, serially, no pool
 *   create → first screenshot, pool    the same from a warm pool of `desktop` containers (TIDEPOOL_WARM_POOL=desktop=N,
 *                                      full before each create): the pool saves the container start, not the session
 *   idle desktop memory                a sandbox after create (Xvfb, xfce4 session, nothing else), once its cgroup's
 *                                      usage settles: memory.current, anonymous memory, and the top processes' PSS
 *
 * Sizes: BENCH_DESKTOP_CREATES (5), BENCH_DESKTOP_POOL (1). The desktop image must exist (the API builds it once;
 * the first create of a fresh machine waits for that build and is not measured).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Sandbox } from '@e2b/desktop';
import { SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { type ApiProcess, startApiProcess } from './api-process.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';
import { mb, readContainerMemory } from './container-memory.ts';

const exec = promisify(execFile);
const CREATES = Math.max(1, Number(process.env.BENCH_DESKTOP_CREATES ?? 5));
const POOL = Math.max(1, Number(process.env.BENCH_DESKTOP_POOL ?? 1));
/** The template's image (the other sections' API processes run without the template). */
const IMAGE = { TIDEPOOL_DESKTOP_IMAGE: process.env.TIDEPOOL_DESKTOP_IMAGE || 'tidepool/desktop:latest' };

type Log = (message: string) => void;

async function poolReady(api: ApiProcess): Promise<number> {
  const text = await (await fetch(`${api.url}/metrics`, { headers: { 'X-API-Key': api.adminKey } })).text();
  let ready = 0;
  for (const match of text.matchAll(/^tidepool_pool_containers\{[^}]*state="ready"[^}]*\} (\d+)/gm)) ready += Number(match[1]);
  return ready;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** create → first screenshot, each serially; returns the durations (ms). */
async function createToScreenshot(api: ApiProcess, count: number, before: () => Promise<void>, log: Log): Promise<{ times: number[]; kept: Sandbox }> {
  const opts = { apiKey: api.apiKey, apiUrl: api.url, sandboxUrl: api.url, requestTimeoutMs: 900_000, timeoutMs: 600_000 };
  const times: number[] = [];
  let kept: Sandbox | undefined;
  for (let i = 0; i < count; i += 1) {
    await before();
    const started = now();
    const desktop = await Sandbox.create(opts);
    const png = await desktop.screenshot();
    times.push(now() - started);
    if (png.byteLength < 1000) throw new Error(`screenshot of ${png.byteLength} bytes`);
    log(`desktop create → screenshot ${i + 1}/${count}: ${ms(times.at(-1)!)}`);
    if (kept) await kept.kill().catch(() => undefined);
    kept = desktop;
  }
  return { times, kept: kept! };
}

/** The sandbox's container memory once memory.current moves less than 2 % over two seconds (at most 60 s). */
async function idleMemory(sandboxId: string): Promise<ReturnType<typeof readContainerMemory>> {
  const { stdout } = await exec('docker', ['ps', '-q', '--no-trunc', '--filter', `label=${SANDBOX_LABEL}=${sandboxId}`]);
  const containerId = stdout.trim();
  if (!containerId) throw new Error(`no container for sandbox ${sandboxId}`);
  let last = readContainerMemory(containerId);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2000));
    const next = readContainerMemory(containerId);
    const moved = Math.abs(next.cgroup.usageBytes - last.cgroup.usageBytes) / last.cgroup.usageBytes;
    last = next;
    if (moved < 0.02) break;
  }
  return last;
}

export async function benchDesktop(log: Log): Promise<Row[]> {
  const rows: Row[] = [];
  log('desktop: API process without a pool (cold creates)');
  const cold = await startApiProcess({ ...IMAGE });
  try {
    // The first create waits for the image when it has to be built; it is not measured.
    const first = await createToScreenshot(cold, 1, async () => undefined, log);
    await first.kept.kill().catch(() => undefined);
    const { times, kept } = await createToScreenshot(cold, CREATES, async () => undefined, log);
    rows.push({
      metric: `desktop create→first screenshot, cold, p50 / max (serial, n=${CREATES})`,
      tidepool: `${ms(percentile(times, 50))} / ${ms(Math.max(...times))}`,
      baseline: '',
      target: '',
      verdict: 'info',
    });
    const memory = await idleMemory(kept.sandboxId);
    const top = [...memory.processes].sort((a, b) => b.pssBytes - a.pssBytes).slice(0, 4);
    rows.push({
      metric: 'idle desktop sandbox memory (Xvfb + xfce4 session): cgroup usage / anon',
      tidepool: `${mb(memory.cgroup.usageBytes)} / ${mb(memory.cgroup.anonBytes)}`,
      baseline: `top PSS: ${top.map((p) => `${p.comm} ${mb(p.pssBytes)}`).join(', ')}`,
      target: '',
      verdict: 'info',
    });
    await kept.kill().catch(() => undefined);
  } finally {
    await cold.stop();
  }
  log(`desktop: API process with a warm pool of ${POOL}`);
  const pooled = await startApiProcess({ ...IMAGE, TIDEPOOL_WARM_POOL: `desktop=${POOL}` });
  try {
    const full = (): Promise<void> => until('the desktop pool to fill', async () => (await poolReady(pooled)) >= POOL, 600_000);
    const { times, kept } = await createToScreenshot(pooled, CREATES, full, log);
    await kept.kill().catch(() => undefined);
    rows.push({
      metric: `desktop create→first screenshot from the pool, p50 / max (serial, n=${CREATES})`,
      tidepool: `${ms(percentile(times, 50))} / ${ms(Math.max(...times))}`,
      baseline: '',
      target: '',
      verdict: 'info',
    });
  } finally {
    await pooled.stop();
  }
  return rows;
}
