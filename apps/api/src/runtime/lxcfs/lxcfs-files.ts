/**
 * Which files of an lxcfs mount a sandbox gets, and how to tell a live lxcfs mount: pure, no I/O.
 *
 * lxcfs serves, per reading process, the /proc files computed from that process's cgroups: memory
 * (meminfo, swaps) from the memory limit, cpuinfo/stat/online from the cpuset and, with `--enable-cfs`, the
 * CFS quota, uptime from the container's start. These are the files runc lets a container bind over /proc.
 */
export const LXCFS_FILES = [
  'proc/cpuinfo',
  'proc/diskstats',
  'proc/loadavg',
  'proc/meminfo',
  'proc/stat',
  'proc/swaps',
  'proc/uptime',
  'sys/devices/system/cpu/online',
] as const;

/** A read-only bind of one lxcfs file over the container's own. */
export interface ProcFileMount {
  source: string;
  target: string;
}

/** The binds for the files this lxcfs serves (`serves(relative)`: the file exists under the mount). */
export function lxcfsMounts(dir: string, serves: (relative: string) => boolean): ProcFileMount[] {
  const root = dir.replace(/\/+$/, '');
  return LXCFS_FILES.filter((file) => serves(file)).map((file) => ({ source: `${root}/${file}`, target: `/${file}` }));
}

/**
 * The filesystem type mounted at `dir` according to /proc/self/mountinfo (the last mount there wins, as the
 * kernel shows the top one), or undefined. Mount points are octal-escaped there (`\040` for a space).
 */
export function mountTypeAt(mountinfo: string, dir: string): string | undefined {
  const wanted = dir.replace(/\/+$/, '') || '/';
  let found: string | undefined;
  for (const line of mountinfo.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!after) continue;
    const mountPoint = before.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
    if (mountPoint === wanted) found = after.split(' ')[0];
  }
  return found;
}
