import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { dialDirect } from './local-node.ts';
import type { NodeRow } from './node-store.ts';
import { NodeSet, type PlacedSandbox } from './node-set.ts';
import { MAX_START_ATTEMPTS, startOnPlacedNode } from './placed-start.ts';
import type { SandboxNode } from './sandbox-node.ts';

const logger = pino({ level: 'silent' });
const capacity = (memoryAvailableMB = 8000) => ({ cpuCount: 4, memoryMB: 8192, memoryAvailableMB });
const fakeNode = (nodeId: string, dial: SandboxNode['dial'] = () => Promise.reject(new Error('no'))): SandboxNode => ({ nodeId, runtime: { nodeId } as unknown as SandboxRuntime, dial });
const row = (nodeId: string, status: NodeRow['status'], memoryAvailableMB = 8000): NodeRow => ({
  nodeId,
  url: `https://${nodeId}`,
  version: '1',
  capacity: capacity(memoryAvailableMB),
  status,
  lastHeartbeat: 0,
  registeredAt: '',
  identity: '',
});

function twoNodes(): NodeSet {
  const set = new NodeSet('a', { lostAfterSeconds: 30 });
  set.add(fakeNode('a'), { status: 'ready', capacity: capacity() });
  set.add(fakeNode('b'), { status: 'ready', capacity: capacity() });
  return set;
}

describe('NodeSet', () => {
  it('counts sandboxes holding a container and creates in flight per node; a release counts once', () => {
    const set = twoNodes();
    const sandboxes: PlacedSandbox[] = [
      { nodeId: 'a', cpuCount: 2, memoryMB: 512, containerId: 'c1' },
      { nodeId: 'a', cpuCount: 2, memoryMB: 512, containerId: null },
      { nodeId: 'gone', cpuCount: 2, memoryMB: 512, containerId: 'c3' },
    ];
    const release = set.reserve('b', 1, 256);
    expect(set.loads(sandboxes)).toEqual([
      expect.objectContaining({ nodeId: 'a', allocatedCpu: 2, allocatedMemoryMB: 512, inFlightCpu: 0 }),
      expect.objectContaining({ nodeId: 'b', allocatedCpu: 0, inFlightCpu: 1, inFlightMemoryMB: 256 }),
    ]);
    expect(set.startingOn('b')).toBe(1);
    release();
    release();
    expect(set.startingOn('b')).toBe(0);
    expect(set.loads([]).find((l) => l.nodeId === 'b')).toMatchObject({ inFlightCpu: 0, inFlightMemoryMB: 0 });
  });

  it('reports a held node registered again while ready or draining as restarted (not a new, returning or lost one)', () => {
    const set = new NodeSet('a', { nodeFor: (r) => fakeNode(r.nodeId) });
    const at = (r: NodeRow, registeredAt: string): NodeRow => ({ ...r, registeredAt });
    expect(set.update([at(row('b', 'ready'), 't1'), at(row('c', 'ready'), 't1'), at(row('d', 'ready'), 't1')]).restarted).toEqual([]);
    expect(set.update([at(row('b', 'ready'), 't1'), at(row('c', 'draining'), 't1'), at(row('d', 'ready'), 't1')]).restarted).toEqual([]);
    expect(set.update([at(row('b', 'ready'), 't2'), at(row('c', 'draining'), 't2'), at(row('d', 'returning'), 't2')])).toEqual({ returning: ['d'], added: [], restarted: ['b', 'c'] });
    expect(set.update([at(row('b', 'ready'), 't2'), at(row('c', 'draining'), 't2'), at(row('d', 'ready'), 't2')]).restarted).toEqual([]);
  });

  it('drives a node at its new address once its row names another (the old node closed), reconciled like a new one', () => {
    const closed: string[] = [];
    const built: string[] = [];
    const set = new NodeSet('a', { nodeFor: (r) => (built.push(r.url), Object.assign(fakeNode(r.nodeId), { url: r.url, close: () => void closed.push(r.url) })) });
    expect(set.update([row('b', 'ready')]).added).toEqual(['b']);
    expect(set.update([row('b', 'ready')]).added).toEqual([]);
    expect(set.update([{ ...row('b', 'ready'), url: 'https://10.0.0.9:7443' }])).toEqual({ returning: [], added: ['b'], restarted: [] });
    expect(built).toEqual(['https://b', 'https://10.0.0.9:7443']);
    expect(closed).toEqual(['https://b']);
    expect((set.node('b') as unknown as { url: string }).url).toBe('https://10.0.0.9:7443');
    // moved while lost and back as returning: reconciled through the returning path, once
    expect(set.update([{ ...row('b', 'returning'), url: 'https://10.0.0.10:7443' }])).toEqual({ returning: ['b'], added: [], restarted: [] });
  });

  it('takes in node rows: statuses and capacities of held nodes, new nodes from the factory, returning ones reported', () => {
    const built: string[] = [];
    const set = new NodeSet('a', { nodeFor: (r) => (built.push(r.nodeId), fakeNode(r.nodeId)) });
    set.add(fakeNode('a'));
    expect(set.update([row('a', 'ready'), row('c', 'returning'), row('d', 'lost')])).toEqual({ returning: ['c'], added: ['d'], restarted: [] });
    expect(built).toEqual(['c', 'd']);
    expect(set.status('d')).toBe('lost');
    // Built once: the next rows only update them.
    expect(set.update([row('c', 'ready'), row('d', 'ready')])).toEqual({ returning: [], added: [], restarted: [] });
    expect(built).toEqual(['c', 'd']);
    expect(set.status('d')).toBe('ready');
    const withoutFactory = new NodeSet('a');
    withoutFactory.add(fakeNode('a'));
    withoutFactory.update([row('x', 'ready')]);
    expect(withoutFactory.has('x')).toBe(false);
    expect(() => withoutFactory.node('x')).toThrow(PlatformError);
  });

  it('a lost or returning node makes its sandboxes with a container unavailable, with the reason; filesystem-paused ones stay', () => {
    const set = twoNodes();
    set.setStatus('b', 'lost');
    expect(set.lostReason({ nodeId: 'b', containerId: 'c' }, 'i1')).toBe('Sandbox "i1" is not available: its node "b" was lost (no heartbeat for more than 30 s)');
    expect(set.lostReason({ nodeId: 'b', containerId: null }, 'i2')).toBeUndefined();
    expect(set.lostReason({ nodeId: 'a', containerId: 'c' }, 'i3')).toBeUndefined();
    set.setStatus('b', 'returning');
    expect(set.lostReason({ nodeId: 'b', containerId: 'c' }, 'i1')).toMatch(/was lost/);
    set.setStatus('b', 'draining');
    expect(set.lostReason({ nodeId: 'b', containerId: 'c' }, 'i1')).toBeUndefined();
  });

  it('dials a remote node through its dial; a node dialled directly gets none (direct connections)', () => {
    const set = new NodeSet('a');
    set.add(fakeNode('a', dialDirect));
    set.add(fakeNode('b'));
    expect(set.dialOf('a')).toBeUndefined();
    expect(set.dialOf('b')).toBeTypeOf('function');
    expect(set.dialOf('unknown')).toBeUndefined();
  });
});

describe('startOnPlacedNode', () => {
  it('a failed start is tried on another node, counted per node; success answers the node it ran on', async () => {
    const set = twoNodes();
    const tried: string[] = [];
    const { result, nodeId } = await startOnPlacedNode(set, () => [], { cpuCount: 1, memoryMB: 256 }, async (node) => {
      tried.push(node.nodeId);
      if (node.nodeId === 'a') throw new Error('engine said no');
      return 'started';
    }, logger);
    expect({ result, nodeId, tried }).toEqual({ result: 'started', nodeId: 'b', tried: ['a', 'b'] });
    expect(set.startOutcomes('a')).toEqual({ successes: 0, fails: 1 });
    expect(set.startOutcomes('b')).toEqual({ successes: 1, fails: 0 });
    expect(set.startingOn('a') + set.startingOn('b')).toBe(0);
  });

  it('gives up after MAX_START_ATTEMPTS nodes with the first error, and never loops on the same node', async () => {
    const set = new NodeSet('n0');
    for (let i = 0; i < 5; i++) set.add(fakeNode(`n${i}`), { status: 'ready', capacity: capacity() });
    const tried: string[] = [];
    await expect(
      startOnPlacedNode(set, () => [], { cpuCount: 1, memoryMB: 256 }, async (node) => {
        tried.push(node.nodeId);
        throw new Error(`failed on ${node.nodeId}`);
      }, logger),
    ).rejects.toThrow('failed on n0');
    expect(tried).toHaveLength(MAX_START_ATTEMPTS);
    expect(new Set(tried).size).toBe(MAX_START_ATTEMPTS);
  });

  it('a refusal of the request itself is not retried elsewhere', async () => {
    const set = twoNodes();
    let calls = 0;
    await expect(
      startOnPlacedNode(set, () => [], { cpuCount: 1, memoryMB: 256 }, async () => {
        calls += 1;
        throw new PlatformError('invalid', 'bad template');
      }, logger),
    ).rejects.toMatchObject({ kind: 'invalid' });
    expect(calls).toBe(1);
  });

  it('429 with Retry-After when every node is full, 503 when none is ready, the last start error when the others are full', async () => {
    const full = new NodeSet('a');
    full.add(fakeNode('a'), { status: 'ready', capacity: capacity(100) });
    full.add(fakeNode('b'), { status: 'lost', capacity: capacity() });
    await expect(startOnPlacedNode(full, () => [], { cpuCount: 1, memoryMB: 256 }, async () => 'x', logger)).rejects.toMatchObject({ kind: 'limit', retryAfterSeconds: 1 });
    const none = new NodeSet('a');
    none.add(fakeNode('a'), { status: 'draining', capacity: capacity() });
    await expect(startOnPlacedNode(none, () => [], { cpuCount: 1, memoryMB: 256 }, async () => 'x', logger)).rejects.toMatchObject({ kind: 'busy' });
    const mixed = new NodeSet('a');
    mixed.add(fakeNode('a'), { status: 'ready', capacity: capacity() });
    mixed.add(fakeNode('b'), { status: 'ready', capacity: capacity(100) });
    await expect(
      startOnPlacedNode(mixed, () => [], { cpuCount: 1, memoryMB: 256 }, async () => {
        throw new Error('engine gone');
      }, logger),
    ).rejects.toThrow('engine gone');
  });
});
