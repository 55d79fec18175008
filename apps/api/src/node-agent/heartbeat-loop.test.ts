import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { NodeCapacity, NodeHeartbeats, NodeRegistration } from '../nodes/sandbox-node.ts';
import { startHeartbeats } from './heartbeat-loop.ts';

/** The tiny in-memory NodeHeartbeats the agent is given in tests; `failures` calls fail first. */
class MemoryHeartbeats implements NodeHeartbeats {
  registrations: NodeRegistration[] = [];
  beats: { nodeId: string; capacity: NodeCapacity }[] = [];
  constructor(private failures = 0) {}
  async register(node: NodeRegistration): Promise<void> {
    if (this.failures-- > 0) throw new Error('database restarting');
    this.registrations.push(node);
  }
  async heartbeat(nodeId: string, capacity: NodeCapacity): Promise<void> {
    this.beats.push({ nodeId, capacity });
  }
}

const until = async (check: () => boolean): Promise<void> => {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('node agent heartbeats', () => {
  it('registers once (retrying until the store takes it), then heartbeats its current capacity; stop ends it', async () => {
    const store = new MemoryHeartbeats(2);
    let memoryAvailableMB = 1000;
    const loop = startHeartbeats({
      heartbeats: store,
      registration: { nodeId: 'node1', url: 'https://198.19.0.11:7443', version: '1' },
      capacity: async () => ({ cpuCount: 2, memoryMB: 2048, memoryAvailableMB: memoryAvailableMB-- }),
      intervalMs: 10,
      logger: pino({ level: 'silent' }),
    });
    await until(() => store.beats.length >= 3);
    await loop.stop();
    expect(store.registrations).toHaveLength(1);
    expect(store.registrations[0]).toMatchObject({ nodeId: 'node1', url: 'https://198.19.0.11:7443', version: '1', capacity: { cpuCount: 2 } });
    expect(store.beats.every((b) => b.nodeId === 'node1')).toBe(true);
    // each beat carries the capacity of its moment
    expect(new Set(store.beats.map((b) => b.capacity.memoryAvailableMB)).size).toBe(store.beats.length);
    const after = store.beats.length;
    await new Promise((r) => setTimeout(r, 50));
    expect(store.beats.length).toBe(after);
  });

  it('keeps beating when reading the capacity fails now and then', async () => {
    const store = new MemoryHeartbeats();
    let calls = 0;
    const loop = startHeartbeats({
      heartbeats: store,
      registration: { nodeId: 'node2', url: 'https://198.19.0.12:7443', version: '1' },
      capacity: async () => {
        calls += 1;
        if (calls % 2 === 0) throw new Error('engine busy');
        return { cpuCount: 1, memoryMB: 1, memoryAvailableMB: 1 };
      },
      intervalMs: 10,
      logger: pino({ level: 'silent' }),
    });
    await until(() => store.beats.length >= 2);
    await loop.stop();
    expect(calls).toBeGreaterThanOrEqual(4);
  });
});
