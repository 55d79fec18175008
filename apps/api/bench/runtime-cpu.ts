/**
 * CPU each OCI runtime spends to run one container, measured without the engine: the image exported once into an
 * OCI bundle (the sandboxes' memory, pids and cpu limits; `/bin/true` as its process), then `<runtime> run` of it
 * `count` times per runtime, interleaved. The user + system time of the runtime and its children (bash's `times`)
 * is what a start costs the machine, and unlike wall time it hardly moves when other work loads the machine.
 * Needs root (the runtimes create namespaces and cgroups) and the runtime binaries on PATH.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { docker } from './docker-baseline.ts';

const exec = promisify(execFile);

/** bash's `times` second line: children's user and system time, e.g. `0m0.020s 0m0.050s`. */
function childrenCpuMs(timesOutput: string): number {
  const line = timesOutput.trim().split('\n').at(-1) ?? '';
  const seconds = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
  if (seconds.length !== 2) throw new Error(`unexpected output of times: ${timesOutput}`);
  return (seconds[0]! + seconds[1]!) * 1000;
}

function ociConfig(): Record<string, unknown> {
  return {
    ociVersion: '1.0.2',
    process: { terminal: false, user: { uid: 0, gid: 0 }, args: ['/bin/true'], env: ['PATH=/usr/bin:/bin'], cwd: '/' },
    root: { path: 'rootfs', readonly: true },
    hostname: 'runtime-cpu',
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    ],
    linux: {
      namespaces: ['pid', 'network', 'ipc', 'uts', 'mount'].map((type) => ({ type })),
      resources: { memory: { limit: 512 * 1024 * 1024, swap: 512 * 1024 * 1024 }, pids: { limit: 1024 }, cpu: { quota: 100_000, period: 100_000 } },
    },
  };
}

/** Mean CPU ms per `run` for each runtime (the same order as `runtimes`). */
export async function runtimeCpuPerRun(image: string, runtimes: string[], count: number): Promise<number[]> {
  const bundle = mkdtempSync(join(tmpdir(), 'tidepool-bench-oci-'));
  const container = await docker(['create', '--label', 'dev.tidepool.bench=runtime-cpu', image]);
  try {
    mkdirSync(join(bundle, 'rootfs'));
    await exec('bash', ['-c', `docker export ${container} | tar -x -C ${join(bundle, 'rootfs')}`], { maxBuffer: 1024 * 1024 });
    writeFileSync(join(bundle, 'config.json'), JSON.stringify(ociConfig()));
    const totals = runtimes.map(() => 0);
    for (let i = 0; i < count; i += 1) {
      for (const [index, runtime] of runtimes.entries()) {
        const { stdout } = await exec('bash', ['-c', `${runtime} run tidepool-bench-cpu-${process.pid}-${i} >/dev/null; times`], { cwd: bundle });
        totals[index]! += childrenCpuMs(stdout);
      }
    }
    return totals.map((total) => total / count);
  } finally {
    await docker(['rm', '-f', container]).catch(() => undefined);
    rmSync(bundle, { recursive: true, force: true });
  }
}
