/**
 * What a container costs in memory, read from the kernel: its memory cgroup (v1 `memory.usage_in_bytes` +
 * `memory.stat` rss/cache, or v2 `memory.current` + `memory.stat` anon/file) and, for each process in it,
 * VmRSS and Pss (`smaps_rollup`: shared pages divided among the processes mapping them, so the Node binary's
 * pages, shared through the page cache by every sandbox, count 1/N per sandbox). Host-wide: MemAvailable.
 * Linux only; the benchmark runs as root (other users' smaps need it).
 */
import { existsSync, readFileSync } from 'node:fs';

export interface CgroupMemory {
  /** memory.current (v2) / memory.usage_in_bytes (v1): everything charged to the container, page cache included. */
  usageBytes: number;
  /** Anonymous memory (v2 `anon`, v1 `rss`): heaps, stacks; never shared. */
  anonBytes: number;
  /** Page cache charged to the container (v2 `file`, v1 `cache`): charged to whichever cgroup touched a page first. */
  fileBytes: number;
}

export interface ProcessMemory {
  pid: number;
  comm: string;
  rssBytes: number;
  /** Proportional set size: private pages plus each shared page divided by the number of processes mapping it. */
  pssBytes: number;
  anonBytes: number;
  fileBytes: number;
}

export interface ContainerMemory {
  cgroup: CgroupMemory;
  processes: ProcessMemory[];
}

/** `key value` lines (memory.stat, /proc/meminfo without the unit) into a map. */
export function parseKeyValues(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([\w()]+):?\s+(\d+)/.exec(line.trim());
    if (match) values.set(match[1]!, Number(match[2]));
  }
  return values;
}

/** The memory cgroup directory of a Docker container on this machine (cgroup v1 or v2, cgroupfs or systemd driver). */
export function cgroupDirOf(containerId: string): string {
  const candidates = [
    `/sys/fs/cgroup/memory/docker/${containerId}`,
    `/sys/fs/cgroup/memory/system.slice/docker-${containerId}.scope`,
    `/sys/fs/cgroup/system.slice/docker-${containerId}.scope`,
    `/sys/fs/cgroup/docker/${containerId}`,
  ];
  const found = candidates.find((dir) => existsSync(`${dir}/memory.stat`));
  if (!found) throw new Error(`no memory cgroup found for container ${containerId} (looked in ${candidates.join(', ')})`);
  return found;
}

export function readCgroupMemory(dir: string): CgroupMemory {
  const stat = parseKeyValues(readFileSync(`${dir}/memory.stat`, 'utf8'));
  if (existsSync(`${dir}/memory.current`)) {
    return { usageBytes: Number(readFileSync(`${dir}/memory.current`, 'utf8')), anonBytes: stat.get('anon') ?? 0, fileBytes: stat.get('file') ?? 0 };
  }
  return { usageBytes: Number(readFileSync(`${dir}/memory.usage_in_bytes`, 'utf8')), anonBytes: stat.get('rss') ?? 0, fileBytes: stat.get('cache') ?? 0 };
}

/** VmRSS and Pss of one process, or undefined when it is gone. */
export function readProcessMemory(pid: number): ProcessMemory | undefined {
  try {
    const status = parseKeyValues(readFileSync(`/proc/${pid}/status`, 'utf8'));
    const rollup = parseKeyValues(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    const kib = (map: Map<string, number>, key: string): number => (map.get(key) ?? 0) * 1024;
    return {
      pid,
      comm,
      rssBytes: kib(status, 'VmRSS'),
      pssBytes: kib(rollup, 'Pss'),
      anonBytes: kib(status, 'RssAnon'),
      fileBytes: kib(status, 'RssFile'),
    };
  } catch {
    return undefined;
  }
}

/** The cgroup's memory and every process in it (pids from `cgroup.procs`, host pid namespace). */
export function readContainerMemory(containerId: string): ContainerMemory {
  const dir = cgroupDirOf(containerId);
  const pids = readFileSync(`${dir}/cgroup.procs`, 'utf8').split('\n').filter(Boolean).map(Number);
  return { cgroup: readCgroupMemory(dir), processes: pids.map(readProcessMemory).filter((p): p is ProcessMemory => p !== undefined) };
}

/** The host's MemAvailable in bytes. */
export function memAvailableBytes(): number {
  const kib = parseKeyValues(readFileSync('/proc/meminfo', 'utf8')).get('MemAvailable');
  if (kib === undefined) throw new Error('/proc/meminfo has no MemAvailable');
  return kib * 1024;
}

/** Bytes as decimal megabytes (the unit of the targets: 40 MB = 40,000,000 bytes). */
export const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`;
