import { readFile, statfs } from 'node:fs/promises';
import { cpus } from 'node:os';

export interface ResourceUsage {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_total: number;
  mem_used: number;
  mem_cache: number;
  mem_total_mib: number;
  mem_used_mib: number;
  disk_used: number;
  disk_total: number;
}

interface CpuSample {
  busy: number;
  total: number;
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function sampleCpu(): Promise<CpuSample> {
  const line = (await readText('/proc/stat'))?.split('\n').find((l) => l.startsWith('cpu ')) ?? 'cpu 0 0 0 0';
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  const total = values.reduce((sum, v) => sum + v, 0);
  return { busy: total - idle, total };
}

/** Memory limit and usage of this cgroup (v2 or v1), when the sandbox has one. */
async function cgroupMemory(): Promise<{ limit: number; usage: number; cache: number } | undefined> {
  const v2Limit = await readText('/sys/fs/cgroup/memory.max');
  if (v2Limit !== undefined) {
    const limit = v2Limit.trim() === 'max' ? Number.NaN : Number(v2Limit);
    const usage = Number(await readText('/sys/fs/cgroup/memory.current'));
    const stat = (await readText('/sys/fs/cgroup/memory.stat')) ?? '';
    const cache = Number(/^file (\d+)/m.exec(stat)?.[1] ?? 0);
    return Number.isFinite(limit) && Number.isFinite(usage) ? { limit, usage, cache } : undefined;
  }
  const v1Limit = Number(await readText('/sys/fs/cgroup/memory/memory.limit_in_bytes'));
  const v1Usage = Number(await readText('/sys/fs/cgroup/memory/memory.usage_in_bytes'));
  if (!Number.isFinite(v1Limit) || !Number.isFinite(v1Usage) || v1Limit > 2 ** 60) return undefined;
  const stat = (await readText('/sys/fs/cgroup/memory/memory.stat')) ?? '';
  const cache = Number(/^cache (\d+)/m.exec(stat)?.[1] ?? 0);
  return { limit: v1Limit, usage: v1Usage, cache };
}

async function hostMemory(): Promise<{ limit: number; usage: number; cache: number }> {
  const info = (await readText('/proc/meminfo')) ?? '';
  const kib = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(info)?.[1] ?? 0) * 1024;
  const total = kib('MemTotal');
  const cache = kib('Cached') + kib('Buffers');
  return { limit: total, usage: total - kib('MemAvailable'), cache };
}

/** Samples CPU, memory and disk; CPU percentage is measured since the previous call. */
export class ResourceMonitor {
  private previous: CpuSample | undefined;

  async sample(): Promise<ResourceUsage> {
    const cpu = await sampleCpu();
    let cpuUsedPct = 0;
    const before = this.previous;
    if (before && cpu.total > before.total) cpuUsedPct = ((cpu.busy - before.busy) / (cpu.total - before.total)) * 100;
    this.previous = cpu;
    const memory = (await cgroupMemory()) ?? (await hostMemory());
    const disk = await statfs('/');
    const diskTotal = disk.blocks * disk.bsize;
    const mib = 1024 * 1024;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: cpus().length,
      cpu_used_pct: Math.round(cpuUsedPct * 100) / 100,
      mem_total: memory.limit,
      mem_used: memory.usage,
      mem_cache: memory.cache,
      mem_total_mib: Math.floor(memory.limit / mib),
      mem_used_mib: Math.floor(memory.usage / mib),
      disk_used: diskTotal - disk.bfree * disk.bsize,
      disk_total: diskTotal,
    };
  }
}
