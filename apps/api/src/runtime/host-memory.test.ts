import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { memAvailableMB, readMemAvailableMB } from './host-memory.ts';

describe('host memory', () => {
  it('reads MemAvailable in MiB from /proc/meminfo text', () => {
    expect(memAvailableMB('MemTotal:       24683520 kB\nMemFree:        21805080 kB\nMemAvailable:   23861760 kB\n')).toBe(23302);
    expect(memAvailableMB('MemTotal: 1 kB\n')).toBeUndefined();
    expect(memAvailableMB('MemAvailable: lots\n')).toBeUndefined();
  });

  it('reads the machine\'s own, and gives undefined for a file that is not there', () => {
    const available = readMemAvailableMB();
    expect(available).toBeGreaterThan(0);
    const dir = mkdtempSync(join(tmpdir(), 'meminfo-'));
    writeFileSync(join(dir, 'meminfo'), 'MemAvailable: 2048 kB\n');
    expect(readMemAvailableMB(join(dir, 'meminfo'))).toBe(2);
    expect(readMemAvailableMB(join(dir, 'missing'))).toBeUndefined();
  });
});
