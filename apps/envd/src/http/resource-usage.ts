import { readFileSync, statfsSync } from 'node:fs';
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

/** Cumulative CPU time: `busy` and `total` in the same unit (jiffies, or µs of cgroup usage vs. wall × cpus). */
interface CpuSample {
  busy: number;
  total: number;
}

/**
 * Small procfs/cgroupfs files, read on the main thread: the platform samples every sandbox every few seconds,
 * and each read through the thread pool (fs/promises: open, stat, read, close) woke pool threads four times.
 */
async function readText(path: string): Promise<string | undefined> {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function hostCpuSample(): Promise<CpuSample> {
  const line = (await readText('/proc/stat'))?.split('\n').find((l) => l.startsWith('cpu ')) ?? 'cpu 0 0 0 0';
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  const total = values.reduce((sum, v) => sum + v, 0);
  return { busy: total - idle, total };
}

/** CPUs available to the sandbox: the cgroup quota (v2 `cpu.max`, v1 CFS) rounded up, capped by the host's. */
async function availableCpus(): Promise<number> {
  const host = cpus().length || 1;
  const v2 = (await readText('/sys/fs/cgroup/cpu.max'))?.trim().split(/\s+/);
  let quota = v2 ? Number(v2[0]) : Number(await readText('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'));
  const period = v2 ? Number(v2[1]) : Number(await readText('/sys/fs/cgroup/cpu/cpu.cfs_period_us'));
  if (!(quota > 0) || !(period > 0)) quota = Number.NaN;
  return Number.isFinite(quota) ? Math.max(1, Math.min(host, Math.ceil(quota / period))) : host;
}

/** Inside a container /proc/stat shows the whole host, so the cgroup's own usage is preferred when readable. */
async function cpuSample(cpuCount: number): Promise<CpuSample> {
  const stat = await readText('/sys/fs/cgroup/cpu.stat');
  const usageUs = stat === undefined ? Number.NaN : Number(/^usage_usec (\d+)/m.exec(stat)?.[1]);
  if (Number.isFinite(usageUs)) return { busy: usageUs, total: performance.now() * 1000 * cpuCount };
  return hostCpuSample();
}

/** Memory limit and usage of this cgroup (v2 or v1), when the sandbox has one. */
async function cgroupMemory(): Promise<{ limit: number; usage: number; cache: number } | undefined> {
  const v2Limit = await readText('/sys/fs/cgroup/memory.max');
  if (v2Limit !== undefined) {
    // No limit: the container may use all of the host's memory, but its usage is still its own.
    const limit = v2Limit.trim() === 'max' ? (await hostMemory()).limit : Number(v2Limit);
    const usage = Number(await readText('/sys/fs/cgroup/memory.current'));
    const stat = (await readText('/sys/fs/cgroup/memory.stat')) ?? '';
    const cache = Number(/^file (\d+)/m.exec(stat)?.[1] ?? 0);
    // Like `docker stats`: reclaimable inactive page cache does not count as used.
    const inactive = Number(/^inactive_file (\d+)/m.exec(stat)?.[1] ?? 0);
    return Number.isFinite(limit) && Number.isFinite(usage) ? { limit, usage: Math.max(0, usage - inactive), cache } : undefined;
  }
  const v1Limit = Number(await readText('/sys/fs/cgroup/memory/memory.limit_in_bytes'));
  const v1Usage = Number(await readText('/sys/fs/cgroup/memory/memory.usage_in_bytes'));
  if (!Number.isFinite(v1Limit) || !Number.isFinite(v1Usage) || v1Limit > 2 ** 60) return undefined;
  const stat = (await readText('/sys/fs/cgroup/memory/memory.stat')) ?? '';
  const cache = Number(/^cache (\d+)/m.exec(stat)?.[1] ?? 0);
  const inactive = Number(/^total_inactive_file (\d+)/m.exec(stat)?.[1] ?? 0);
  return { limit: v1Limit, usage: Math.max(0, v1Usage - inactive), cache };
}

async function hostMemory(): Promise<{ limit: number; usage: number; cache: number }> {
  const info = (await readText('/proc/meminfo')) ?? '';
  const kib = (key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(info)?.[1] ?? 0) * 1024;
  const total = kib('MemTotal');
  const cache = kib('Cached') + kib('Buffers');
  return { limit: total, usage: total - kib('MemAvailable'), cache };
}

/** Samples CPU, memory and disk; CPU percentage is measured since the previous call (or since startup). */
export class ResourceMonitor {
  private previous: Promise<CpuSample>;
  private readonly cpuCount = availableCpus();

  constructor() {
    // A first sample right away, so that the first request already gets a meaningful delta.
    this.previous = this.cpuCount.then(cpuSample);
  }

  async sample(): Promise<ResourceUsage> {
    const cpuCount = await this.cpuCount;
    const before = await this.previous;
    const current = cpuSample(cpuCount);
    this.previous = current;
    const cpu = await current;
    let cpuUsedPct = 0;
    if (cpu.total > before.total) cpuUsedPct = Math.min(100, Math.max(0, ((cpu.busy - before.busy) / (cpu.total - before.total)) * 100));
    const memory = (await cgroupMemory()) ?? (await hostMemory());
    const disk = statfsSync('/');
    const diskTotal = disk.blocks * disk.bsize;
    const mib = 1024 * 1024;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: cpuCount,
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
