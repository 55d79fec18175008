/**
 * What a node's engine can leave behind on the host when it dies hard (SIGKILL, a crash, a reboot of the
 * test runner): processes (dockerd, its containerd, container shims, docker-proxy, the containers' own
 * processes), mounts under the node's directory (overlay2 layers, netns bind mounts, the data root's own
 * bind mount) and cgroups under the node's cgroup parent. Each is found by something the node owns (its
 * directory, its network namespace, its cgroup parent), never by a process name.
 */
import { readdirSync, readFileSync, readlinkSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './docker.ts';
import { isProcessAlive } from './process-alive.ts';

const CGROUP_ROOT = '/sys/fs/cgroup';

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

/** Inode of a named network namespace (`/run/netns/<name>`), or undefined when it does not exist. */
export function netnsInode(netns: string): number | undefined {
  try {
    return statSync(join('/run/netns', netns)).ino;
  } catch {
    return undefined;
  }
}

function processNetnsInode(pid: string): number | undefined {
  try {
    const match = /^net:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/ns/net`));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Pids of processes that belong to a node (or the registry): running in its network namespace, or with its
 * directory in their command line (containerd and the shims name sockets under the exec root).
 */
export function nodeProcesses(opts: { netns?: string; dir: string }): number[] {
  const inode = opts.netns ? netnsInode(opts.netns) : undefined;
  const own = ownAncestry();
  const pids: number[] = [];
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    if (own.has(Number(pid))) continue; // e.g. \`pnpm cluster:local down --dir <dir>\` and its tsx wrapper
    const inNamespace = inode !== undefined && processNetnsInode(pid) === inode;
    const cmdline = readOr(`/proc/${pid}/cmdline`, '').split('\0');
    const namesDir = cmdline.some((arg) => arg === opts.dir || arg.startsWith(`${opts.dir}/`) || arg.includes(`=${opts.dir}/`) || arg.includes(`://${opts.dir}/`));
    if (inNamespace || namesDir) pids.push(Number(pid));
  }
  return pids;
}

/** This process and its ancestors (never leftovers, even when their command line names the directory). */
function ownAncestry(): Set<number> {
  const pids = new Set<number>();
  let pid = process.pid;
  while (pid > 1 && !pids.has(pid)) {
    pids.add(pid);
    const ppid = parentPid(readOr(`/proc/${pid}/stat`, ''));
    if (ppid === undefined) break;
    pid = ppid;
  }
  return pids;
}

/** The parent pid in /proc/<pid>/stat text: "pid (comm) state ppid …", where comm may hold spaces and ")". */
export function parentPid(stat: string): number | undefined {
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const ppid = Number(stat.slice(close + 2).split(' ')[1]);
  return Number.isInteger(ppid) && ppid >= 0 ? ppid : undefined;
}

/** Cgroup directories named after the node's cgroup parent, in every mounted hierarchy (v1 and v2). */
function cgroupDirs(cgroupParent: string): string[] {
  const dirs: string[] = [];
  const direct = join(CGROUP_ROOT, cgroupParent);
  if (isDir(direct)) dirs.push(direct); // cgroup v2 (unified at the root)
  let hierarchies: string[] = [];
  try {
    hierarchies = readdirSync(CGROUP_ROOT);
  } catch {
    return dirs;
  }
  for (const hierarchy of hierarchies) {
    const dir = join(CGROUP_ROOT, hierarchy, cgroupParent);
    if (isDir(dir)) dirs.push(dir);
  }
  return dirs;
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Pids in a cgroup tree (the container processes of the node). */
export function cgroupProcesses(cgroupParent: string): number[] {
  const pids = new Set<number>();
  const walk = (dir: string): void => {
    for (const line of readOr(join(dir, 'cgroup.procs'), '').split('\n')) if (/^\d+$/.test(line)) pids.add(Number(line));
    let entries: string[] = [];
    try {
      entries = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return;
    }
    for (const entry of entries) walk(join(dir, entry));
  };
  for (const dir of cgroupDirs(cgroupParent)) walk(dir);
  return [...pids];
}

/** Removes the node's (now empty) cgroup trees, deepest first. Returns what could not be removed. */
export function removeCgroups(cgroupParent: string): string[] {
  const stuck: string[] = [];
  const remove = (dir: string): void => {
    let entries: string[] = [];
    try {
      entries = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch {
      return;
    }
    for (const entry of entries) remove(join(dir, entry));
    try {
      rmdirSync(dir);
    } catch {
      stuck.push(dir);
    }
  };
  for (const dir of cgroupDirs(cgroupParent)) remove(dir);
  return stuck;
}

/** SIGKILLs every pid and waits (bounded) until they are gone. Returns those still alive. */
export async function killAll(pids: number[], timeoutMs = 10_000): Promise<number[]> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + timeoutMs;
  let left = pids.filter(isProcessAlive);
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    left = left.filter(isProcessAlive);
  }
  return left;
}

/** Mount points at or under `dir` in this process's mount namespace, deepest first. */
export function mountsUnder(dir: string): string[] {
  return mountPointsUnder(readOr('/proc/self/mountinfo', ''), dir);
}

/** From mountinfo text: the mount points (field 5, octal escapes undone) at or under `dir`, deepest first. */
export function mountPointsUnder(mountinfo: string, dir: string): string[] {
  const points = mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((point): point is string => point !== undefined)
    .map((point) => point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point) => point === dir || point.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Unmounts everything under `dir` (lazily when busy). Returns what is still mounted. */
export async function unmountUnder(dir: string): Promise<string[]> {
  for (let pass = 0; pass < 3; pass += 1) {
    const points = mountsUnder(dir);
    if (points.length === 0) return [];
    for (const point of points) {
      if ((await run('umount', [point], { timeoutMs: 30_000 })).exitCode !== 0) await run('umount', ['-l', point], { timeoutMs: 30_000 });
    }
  }
  return mountsUnder(dir);
}
