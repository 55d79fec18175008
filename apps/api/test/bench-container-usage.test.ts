/**
 * The density benchmark's readings (apps/api/bench/container-memory.ts, container-cpu.ts) against a real
 * container of the base image running tini + sleep, and this machine's own /proc.
 */
import { ensureBaseImage } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { containerCpuNs, idleCpuPercent } from '../bench/container-cpu.ts';
import { memAvailableBytes, parseKeyValues, readContainerMemory, readProcessMemory } from '../bench/container-memory.ts';
import { docker, removeLabelled, startIdleContainers } from '../bench/docker-baseline.ts';

const label = `usage-test-${process.pid}`;
let id: string;

beforeAll(async () => {
  const image = await ensureBaseImage();
  [id] = await startIdleContainers(image, 1, label);
}, 600_000);
afterAll(async () => {
  await removeLabelled(label);
});

describe('bench container readings', () => {
  it('parses memory.stat and /proc/meminfo lines', () => {
    const stat = parseKeyValues('cache 4096\nrss 8192\ntotal_rss 8192\n');
    expect(stat.get('rss')).toBe(8192);
    expect(stat.get('cache')).toBe(4096);
    expect(parseKeyValues('MemTotal:       24683656 kB\nMemAvailable:   23917668 kB\n').get('MemAvailable')).toBe(23917668);
    expect(memAvailableBytes()).toBeGreaterThan(0);
  });

  it("reads a container's cgroup memory and the VmRSS and Pss of each of its processes", async () => {
    const memory = readContainerMemory(id);
    expect(memory.processes.map((p) => p.comm).sort()).toEqual(['sleep', 'tini']);
    expect(memory.cgroup.usageBytes).toBeGreaterThan(0);
    expect(memory.cgroup.usageBytes).toBeGreaterThanOrEqual(memory.cgroup.anonBytes);
    for (const p of memory.processes) {
      expect(p.rssBytes).toBeGreaterThan(0);
      expect(p.pssBytes).toBeGreaterThan(0);
      expect(p.pssBytes).toBeLessThanOrEqual(p.rssBytes);
    }
    // This process's own figures grow with what it allocates.
    const before = readProcessMemory(process.pid)!;
    const block = Buffer.alloc(64 * 1024 * 1024, 1);
    const after = readProcessMemory(process.pid)!;
    expect(after.anonBytes - before.anonBytes).toBeGreaterThan(60 * 1024 * 1024);
    expect(block.length).toBe(64 * 1024 * 1024);
    expect(readProcessMemory(2 ** 22 + 1)).toBeUndefined();
  });

  it("reads a container's CPU time: still when idle, growing when it works", async () => {
    expect(await idleCpuPercent([id], 1_000)).toBeLessThan(5);
    const before = containerCpuNs(id);
    await docker(['exec', id, 'sh', '-c', 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done']);
    expect(containerCpuNs(id) - before).toBeGreaterThan(50e6);
  });
});
