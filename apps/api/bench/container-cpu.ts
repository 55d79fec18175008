/**
 * CPU time a Docker container used so far, from its cgroup (v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec),
 * for measuring what idle sandboxes cost when nothing talks to them (timers that wake envd).
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseKeyValues } from './container-memory.ts';

/** Nanoseconds of CPU the container's processes used since it started. */
export function containerCpuNs(containerId: string): number {
  const v1 = [`/sys/fs/cgroup/cpuacct/docker/${containerId}`, `/sys/fs/cgroup/cpuacct/system.slice/docker-${containerId}.scope`, `/sys/fs/cgroup/cpu,cpuacct/docker/${containerId}`];
  for (const dir of v1) if (existsSync(`${dir}/cpuacct.usage`)) return Number(readFileSync(`${dir}/cpuacct.usage`, 'utf8'));
  const v2 = [`/sys/fs/cgroup/system.slice/docker-${containerId}.scope`, `/sys/fs/cgroup/docker/${containerId}`];
  for (const dir of v2) {
    if (existsSync(`${dir}/cpu.stat`)) return (parseKeyValues(readFileSync(`${dir}/cpu.stat`, 'utf8')).get('usage_usec') ?? 0) * 1000;
  }
  throw new Error(`no cpu cgroup found for container ${containerId}`);
}

/** CPU the containers used together over `windowMs`, as a percentage of one core. */
export async function idleCpuPercent(containerIds: string[], windowMs: number): Promise<number> {
  const read = (): number => containerIds.reduce((sum, id) => sum + safeCpu(id), 0);
  const before = read();
  const start = performance.now();
  await new Promise((r) => setTimeout(r, windowMs));
  const used = read() - before;
  return (used / 1e6 / (performance.now() - start)) * 100;
}

function safeCpu(id: string): number {
  try {
    return containerCpuNs(id);
  } catch {
    return 0;
  }
}
