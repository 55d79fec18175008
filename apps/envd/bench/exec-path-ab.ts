/**
 * A/B of envd's command path, interleaved in one run so machine load hits both sides alike:
 *
 *   pnpm --filter @tidepool/envd exec tsx bench/exec-path-ab.ts
 *
 * Two envd bundles side by side on 127.0.0.1, both as root with the exec-as-user helper:
 *   new  spawn server (`exec-as-user --serve`) + the Start fast path (the defaults)
 *   old  ENVD_SPAWN_SERVER=false ENVD_START_FAST_PATH=false: a fork of envd per command through the one-shot
 *        helper, Start through connect-es
 * and the SDK's commands.run('true') alternating between them (as BENCH_USER, default nobody, cwd /tmp).
 * With BENCH_ENVD_BEFORE_DIR (the `apps/envd` directory of another checkout), `old` is that checkout's envd with
 * its defaults instead: an A/B of a change to envd.
 * Prints p50/p90 of each and the CPU envd itself spent per command (/proc/<pid>/stat), which stays
 * meaningful when other work on the machine makes wall times noisy. BENCH_RUNS (default 300);
 * BENCH_ENVD_PROFILE_DIR: both envds run with `--cpu-prof` into that directory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { getFreePort, waitForEnvd } from '@tidepool/testkit';
import { Sandbox } from 'e2b';

const envdRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Math.max(10, Number(process.env.BENCH_RUNS ?? 300));
const USER = (process.env.BENCH_USER ?? 'nobody') as 'root';

interface Side {
  name: string;
  child: ChildProcess;
  sbx: Sandbox;
  samples: number[];
  cpuMs: number;
}

/** utime + stime of a process in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function start(name: string, bundle: string, helper: string, env: Record<string, string>): Promise<Side> {
  const port = await getFreePort();
  const profileDir = process.env.BENCH_ENVD_PROFILE_DIR;
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, bundle, '-debug', '-port', String(port), '-host', '127.0.0.1', '-log-level', 'error'], {
    env: { ...process.env, ENVD_FORWARD_LOCAL_PORTS: 'false', ENVD_EXEC_HELPER: helper, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForEnvd(url, 20_000, async () => child.exitCode === null);
  const sbx = await Sandbox.create({ debug: true, sandboxUrl: url, apiKey: 'bench' });
  return { name, child, sbx, samples: [], cpuMs: 0 };
}

/** envd of the checkout at `root` (an `apps/envd` directory) bundled into its dist/ (next to its node_modules). */
function bundleOf(root: string): string {
  const bundle = join(root, 'dist', 'envd.mjs');
  if (spawnSync(process.execPath, [join(root, 'scripts', 'bundle.mjs'), '--outfile', bundle, '--quiet'], { stdio: 'inherit' }).status !== 0) throw new Error(`bundling envd of ${root} failed`);
  return bundle;
}

async function runOnce(side: Side, measure: boolean): Promise<void> {
  const cpuBefore = measure ? cpuMs(side.child.pid!) : 0;
  const t0 = performance.now();
  await side.sbx.commands.run('true', { user: USER, cwd: '/tmp' });
  if (!measure) return;
  side.samples.push(performance.now() - t0);
  side.cpuMs += cpuMs(side.child.pid!) - cpuBefore;
}

const quantile = (samples: number[], q: number): number => [...samples].sort((a, b) => a - b)[Math.min(samples.length - 1, Math.floor(q * samples.length))];

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root: envd starts commands as BENCH_USER through the exec-as-user helper');
  const work = mkdtempSync(join(tmpdir(), 'envd-exec-ab-'));
  const sides: Side[] = [];
  try {
    const bundle = bundleOf(envdRoot);
    const helper = join(work, 'exec-as-user');
    if (spawnSync('sh', [join(envdRoot, 'native', 'build-exec-helper.sh'), helper], { stdio: 'inherit' }).status !== 0) throw new Error('building exec-as-user failed');
    sides.push(await start('new (spawn server + Start fast path)', bundle, helper, {}));
    const beforeDir = process.env.BENCH_ENVD_BEFORE_DIR;
    if (beforeDir) sides.push(await start(`before (${beforeDir})`, bundleOf(resolve(beforeDir)), helper, {}));
    else sides.push(await start('old (fork per command + connect-es)', bundle, helper, { ENVD_SPAWN_SERVER: 'false', ENVD_START_FAST_PATH: 'false' }));
    for (let i = 0; i < 30; i++) for (const side of sides) await runOnce(side, false);
    for (let i = 0; i < RUNS; i++) for (const side of sides) await runOnce(side, true);
    process.stdout.write(`commands.run('true') as ${USER}, ${RUNS} runs each, interleaved (Node ${process.version})\n`);
    for (const side of sides) {
      process.stdout.write(
        `  ${side.name.padEnd(44)} (pid ${side.child.pid}) p50 ${quantile(side.samples, 0.5).toFixed(2)} ms  p90 ${quantile(side.samples, 0.9).toFixed(2)} ms  envd CPU ${(side.cpuMs / RUNS).toFixed(2)} ms/command\n`,
      );
    }
  } finally {
    for (const side of sides) side.child.kill('SIGTERM');
    rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
