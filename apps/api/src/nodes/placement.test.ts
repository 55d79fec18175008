import { describe, expect, it } from 'vitest';
import { type NodeLoad, place } from './placement.ts';

const node = (nodeId: string, overrides: Partial<NodeLoad> = {}, capacity: Partial<NodeLoad['capacity']> = {}): NodeLoad => ({
  nodeId,
  status: 'ready',
  capacity: { cpuCount: 8, memoryMB: 16384, memoryAvailableMB: 12000, ...capacity },
  allocatedCpu: 0,
  allocatedMemoryMB: 0,
  inFlightCpu: 0,
  inFlightMemoryMB: 0,
  ...overrides,
});

const small = { cpuCount: 2, memoryMB: 512 };

describe('placement', () => {
  it('picks the node with the most free CPU and memory, counting creates in flight', () => {
    expect(place([node('a', { allocatedCpu: 6, allocatedMemoryMB: 4096 }), node('b', { allocatedCpu: 2, allocatedMemoryMB: 1024 })], small)).toEqual({ kind: 'placed', nodeId: 'b' });
    // b's creates in flight make a the emptier one.
    expect(place([node('a', { allocatedCpu: 2 }), node('b', { inFlightCpu: 6, inFlightMemoryMB: 3072 })], small)).toEqual({ kind: 'placed', nodeId: 'a' });
  });

  it('is deterministic on ties (smallest id), so equal nodes do not flap', () => {
    expect(place([node('b'), node('a'), node('c')], small)).toEqual({ kind: 'placed', nodeId: 'a' });
  });

  it('prefers a ready pool container, then a present image, over a little more free room', () => {
    const nodes = [node('a'), node('b', { allocatedCpu: 2, allocatedMemoryMB: 1024 }, { poolReady: { base: 1 } }), node('c', { allocatedCpu: 1 }, { images: ['img:1'] })];
    expect(place(nodes, { ...small, poolKey: 'base', image: 'img:1' })).toEqual({ kind: 'placed', nodeId: 'b' });
    expect(place(nodes, { ...small, poolKey: 'other', image: 'img:1' })).toEqual({ kind: 'placed', nodeId: 'c' });
    expect(place(nodes, { ...small, poolKey: 'base', image: 'img:1', exclude: new Set(['b']) })).toEqual({ kind: 'placed', nodeId: 'c' });
  });

  it('skips lost, draining, returning and full nodes', () => {
    const nodes = [
      node('a', { status: 'lost' }),
      node('b', { status: 'draining' }),
      node('c', { status: 'returning' }),
      node('d', {}, { memoryAvailableMB: 400 }),
      node('e', { inFlightMemoryMB: 11800 }),
      node('z', { allocatedCpu: 7, allocatedMemoryMB: 15000 }),
    ];
    expect(place(nodes, small)).toEqual({ kind: 'placed', nodeId: 'z' });
  });

  it('counts creates in flight at what a starting sandbox takes (when their number is known), the new one at its whole limit', () => {
    const request = { cpuCount: 2, memoryMB: 1024 };
    // 7,000 MiB available, six 1 GiB creates in flight: room for one more 1 GiB sandbox beside six starting ones.
    const busy = node('a', { inFlightMemoryMB: 6 * 1024, inFlightCount: 6 }, { memoryAvailableMB: 7000 });
    expect(place([busy], request)).toEqual({ kind: 'placed', nodeId: 'a' });
    // Without the count every create counts at its limit.
    expect(place([node('a', { inFlightMemoryMB: 6 * 1024 }, { memoryAvailableMB: 7000 })], request)).toMatchObject({ kind: 'full' });
    // The new sandbox's own limit must still fit: 6 × 64 MiB starting + 1024 > 1400.
    expect(place([node('a', { inFlightMemoryMB: 6 * 1024, inFlightCount: 6 }, { memoryAvailableMB: 1400 })], request)).toMatchObject({ kind: 'full' });
    expect(place([node('a', { inFlightMemoryMB: 6 * 1024, inFlightCount: 6 }, { memoryAvailableMB: 1024 + 6 * 64 })], request)).toEqual({ kind: 'placed', nodeId: 'a' });
  });

  it('full (429) only when every ready node is full; unavailable when no node is ready at all', () => {
    const full = place([node('a', {}, { memoryAvailableMB: 100 }), node('b', { inFlightMemoryMB: 11900 }), node('c', { status: 'lost' })], small);
    expect(full).toMatchObject({ kind: 'full', message: expect.stringMatching(/every node is full/) });
    expect(place([node('a', { status: 'lost' }), node('b', { status: 'draining' })], small)).toMatchObject({ kind: 'unavailable' });
    expect(place([], small)).toMatchObject({ kind: 'unavailable', message: 'no node is ready to run sandboxes' });
  });

  it('a failed start retries elsewhere: excluded nodes are not chosen again, and running out of nodes says so', () => {
    const nodes = [node('a'), node('b', { allocatedCpu: 4 })];
    expect(place(nodes, { ...small, exclude: new Set(['a']) })).toEqual({ kind: 'placed', nodeId: 'b' });
    expect(place(nodes, { ...small, exclude: new Set(['a', 'b']) })).toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/2 failed start/) });
  });

  it('a sandbox mounting a volume goes to the volume node, even when another is emptier; 429 when that node is full; refused when it is lost', () => {
    const nodes = [node('a'), node('vol', { allocatedCpu: 7, allocatedMemoryMB: 14000 })];
    expect(place(nodes, { ...small, requiredNode: 'vol' })).toEqual({ kind: 'placed', nodeId: 'vol' });
    expect(place([node('a'), node('vol', {}, { memoryAvailableMB: 10 })], { ...small, requiredNode: 'vol' })).toMatchObject({ kind: 'full' });
    expect(place([node('a'), node('vol', { status: 'lost' })], { ...small, requiredNode: 'vol' })).toMatchObject({
      kind: 'unavailable',
      message: expect.stringContaining('"vol"'),
    });
  });

  it("a fork prefers its source's node (the checkpoint is there) over an emptier one, and goes elsewhere when the source cannot take it", () => {
    const source = node('src', { allocatedCpu: 7, allocatedMemoryMB: 15000 }, { images: [] });
    const others = [node('a', {}, { images: ['img:1'] }), node('b')];
    // Preferred even against more room and a present image elsewhere.
    expect(place([source, ...others], { ...small, image: 'img:1', preferredNode: 'src' })).toEqual({ kind: 'placed', nodeId: 'src' });
    // Full, draining, lost, returning or left out (a failed start, egress rules it cannot apply): the best other node.
    expect(place([node('src', {}, { memoryAvailableMB: 100 }), ...others], { ...small, preferredNode: 'src' })).toEqual({ kind: 'placed', nodeId: 'a' });
    for (const status of ['draining', 'lost', 'returning'] as const) {
      expect(place([node('src', { status }), node('a', { allocatedCpu: 4 }), node('b')], { ...small, preferredNode: 'src' })).toEqual({ kind: 'placed', nodeId: 'b' });
    }
    expect(place([node('src'), ...others], { ...small, preferredNode: 'src', exclude: new Set(['src']) })).toEqual({ kind: 'placed', nodeId: 'a' });
    // Only the other nodes full beside a full source: 429; a source no longer known: the others decide.
    expect(place([node('src', {}, { memoryAvailableMB: 100 }), node('a', {}, { memoryAvailableMB: 100 })], { ...small, preferredNode: 'src' })).toMatchObject({ kind: 'full' });
    expect(place(others, { ...small, preferredNode: 'gone' })).toEqual({ kind: 'placed', nodeId: 'a' });
    // A required node (a volume's) still wins: the preference only chooses among candidates.
    expect(place([node('src'), node('vol', { allocatedCpu: 6 })], { ...small, preferredNode: 'src', requiredNode: 'vol' })).toEqual({ kind: 'placed', nodeId: 'vol' });
  });

  it('a node reporting nonsense capacity (zero CPUs or memory) is never preferred over a sane one', () => {
    expect(place([node('a', {}, { cpuCount: 0, memoryMB: 0 }), node('b', { allocatedCpu: 7, allocatedMemoryMB: 16000 })], small)).toEqual({ kind: 'placed', nodeId: 'b' });
  });
});
