import { describe, expect, it } from 'vitest';
import { CpuSets } from './cpu-sets.ts';

describe('CpuSets', () => {
  it('spreads sandboxes with fewer cpus than the host round-robin, wrapping around', () => {
    const sets = new CpuSets(4);
    expect([sets.take(1), sets.take(1), sets.take(2), sets.take(3), sets.take(1)]).toEqual(['0', '1', '2,3', '0,1,2', '3']);
  });

  it('gives no cpuset to a sandbox with as many cpus as the host or more, or a nonsense count', () => {
    const sets = new CpuSets(2);
    expect(sets.take(2)).toBeUndefined();
    expect(sets.take(8)).toBeUndefined();
    expect(sets.take(0)).toBeUndefined();
    expect(sets.take(Number.NaN)).toBeUndefined();
    expect(sets.take(1)).toBe('0');
    // Fractions round up: 1.5 cpus of time may run on two.
    expect(new CpuSets(4).take(1.5)).toBe('0,1');
  });
});
