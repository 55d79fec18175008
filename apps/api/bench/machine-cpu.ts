/**
 * The whole machine's CPU over a window, from /proc/stat's `cpu` line: how busy every core was, whatever process
 * used it (the SDK clients, the platform, dockerd, envd and the shells in the sandboxes, the kernel). A burst that
 * keeps every core busy from its first request to its last answer is bounded by the CPU its work needs, not by
 * waiting.
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

export interface MachineCpu {
  /** CPU time all processes used in the window (ms, summed over cores). */
  busyMs: number;
  /** busyMs as a share of what the cores could give in the window (0–1). */
  busyShare: number;
  wallMs: number;
  cores: number;
}

/** Jiffies (USER_HZ is 100 on Linux: 10 ms each) all cores spent busy since boot. */
function busyJiffies(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  // cpu user nice system idle iowait irq softirq … (guest time is inside user)
  const [user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).slice(1, 8).map(Number) as number[];
  return user! + nice! + system! + irq! + softirq!;
}

/** Starts a window; the returned function ends it and tells what the machine's cores did in it. */
export function machineCpuWindow(): () => MachineCpu {
  const before = busyJiffies();
  const start = performance.now();
  return () => {
    const busyMs = (busyJiffies() - before) * 10;
    const wallMs = performance.now() - start;
    const cores = cpus().length;
    return { busyMs, busyShare: wallMs > 0 ? busyMs / (wallMs * cores) : 0, wallMs, cores };
  };
}
