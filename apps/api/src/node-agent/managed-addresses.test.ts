import { describe, expect, it } from 'vitest';
import type { ManagedContainer } from '../runtime/sandbox-runtime.ts';
import { ManagedAddresses } from './managed-addresses.ts';

/** A runtime whose container list the test edits, counting the fetches; a clock the test moves. */
function fixture() {
  const state = { now: 1_000, running: [] as string[], fetches: 0, slept: [] as number[] };
  const runtime = {
    listManaged: async (): Promise<ManagedContainer[]> => {
      state.fetches += 1;
      const snapshot = [...state.running];
      await Promise.resolve();
      return snapshot.map((address, i) => ({ containerId: `c${i}`, address, status: 'running' }) as unknown as ManagedContainer);
    },
  };
  const sleep = async (ms: number): Promise<void> => {
    state.slept.push(ms);
    state.now += ms;
  };
  const managed = new ManagedAddresses(runtime, { ttlMs: 2_000, minRefreshMs: 250, now: () => state.now, sleep });
  return { state, managed };
}

describe('ManagedAddresses', () => {
  it('answers known addresses from the cache and refuses others after a fresh fetch', async () => {
    const { state, managed } = fixture();
    state.running = ['10.0.0.2'];
    expect(await managed.has('10.0.0.2')).toBe(true);
    expect(await managed.has('10.0.0.2')).toBe(true);
    expect(state.fetches).toBe(1);
    expect(await managed.has('10.0.0.9')).toBe(false);
    expect(state.fetches).toBe(2);
  });

  it('finds a container started right after the last fetch (the burst case): waits out the spacing, never refuses it', async () => {
    const { state, managed } = fixture();
    state.running = ['10.0.0.2'];
    await managed.has('10.0.0.2');
    state.now += 10;
    state.running.push('10.0.0.3');
    expect(await managed.has('10.0.0.3')).toBe(true);
    expect(state.slept).toEqual([240]);
  });

  it('misses arriving together share one fetch', async () => {
    const { state, managed } = fixture();
    await managed.has('10.0.0.1');
    state.running = ['10.0.0.5', '10.0.0.6'];
    const answers = await Promise.all(['10.0.0.5', '10.0.0.6', '10.0.0.7', '10.0.0.8'].map((a) => managed.has(a)));
    expect(answers).toEqual([true, true, false, false]);
    expect(state.fetches).toBe(2);
  });

  it('a miss during a fetch that started before it waits for the next fetch', async () => {
    const { state, managed } = fixture();
    const first = managed.has('10.0.0.1');
    state.now += 1;
    state.running = ['10.0.0.4'];
    // The first fetch took its snapshot before 10.0.0.4 ran; this question was asked after it started.
    const second = managed.has('10.0.0.4');
    expect(await first).toBe(false);
    expect(await second).toBe(true);
    expect(state.fetches).toBe(2);
  });

  it('refetches after the time to live, so a removed container is refused', async () => {
    const { state, managed } = fixture();
    state.running = ['10.0.0.2'];
    expect(await managed.has('10.0.0.2')).toBe(true);
    state.running = [];
    state.now += 2_001;
    expect(await managed.has('10.0.0.2')).toBe(false);
  });

  it('a failing engine rejects the question (the tunnel answers 503) and a later question fetches again', async () => {
    const { state } = fixture();
    let failing = true;
    const runtime = { listManaged: async (): Promise<ManagedContainer[]> => (failing ? Promise.reject(new Error('engine down')) : []) };
    const flaky = new ManagedAddresses(runtime, { now: () => state.now, sleep: async (ms) => void (state.now += ms) });
    await expect(flaky.has('10.0.0.2')).rejects.toThrow('engine down');
    failing = false;
    expect(await flaky.has('10.0.0.2')).toBe(false);
  });
});
