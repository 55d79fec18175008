import { describe, expect, it } from 'vitest';
import { DEFAULT_WARM_POOL_MIN, buildOfPoolKey, isPoolOff, parseWarmPool, poolKey } from './pool-settings.ts';

describe('warm pool settings', () => {
  it('pins nothing by default; adaptive floors default to two containers of base', () => {
    expect(parseWarmPool(undefined)).toEqual({});
    expect(parseWarmPool(undefined, DEFAULT_WARM_POOL_MIN)).toEqual({ base: 2 });
    expect(isPoolOff(undefined)).toBe(false);
    for (const off of ['0', 'off', ' OFF ', '']) expect(isPoolOff(off)).toBe(true);
    expect(isPoolOff('base=2')).toBe(false);
  });

  it('reads template=count lists; 0, off or empty disable', () => {
    expect(parseWarmPool('base=3, my-app:v1 = 1')).toEqual({ base: 3, 'my-app:v1': 1 });
    expect(parseWarmPool('base=0,other=2')).toEqual({ other: 2 });
    for (const off of ['0', 'off', 'OFF', '', '  ']) expect(parseWarmPool(off)).toEqual({});
  });

  it('names the malformed entry', () => {
    expect(parseWarmPool('base=2,oops')).toBe('oops');
    expect(parseWarmPool('base=-1')).toBe('base=-1');
    expect(parseWarmPool('base=two')).toBe('base=two');
    expect(parseWarmPool('base=1,base=2')).toBe('base=2');
    expect(parseWarmPool('base=100000')).toBe('base=100000');
  });

  it('keys by build, cpu and memory', () => {
    const key = poolKey({ buildId: 'b1', cpuCount: 2, memoryMB: 512 });
    expect(key).toBe('b1/2/512');
    expect(poolKey({ buildId: 'b1', cpuCount: 1, memoryMB: 512 })).not.toBe(key);
    expect(buildOfPoolKey(key)).toBe('b1');
  });
});
