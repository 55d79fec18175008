import { readFileSync } from 'node:fs';

/** `MemAvailable` (MiB) from the text of /proc/meminfo; undefined when the line is missing or malformed. */
export function memAvailableMB(meminfo: string): number | undefined {
  const match = /^MemAvailable:\s+(\d+)\s+kB$/m.exec(meminfo);
  return match ? Math.floor(Number(match[1]) / 1024) : undefined;
}

/**
 * What the machine has available now (MiB), read from /proc/meminfo each call (cheap: a small procfs file);
 * undefined where there is none (not Linux) or it cannot be read.
 */
export function readMemAvailableMB(path = '/proc/meminfo'): number | undefined {
  try {
    return memAvailableMB(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}
