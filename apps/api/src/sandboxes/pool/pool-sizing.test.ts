import { describe, expect, it } from 'vitest';
import { DemandHistory, type SizingCaps, decideSize } from './pool-sizing.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;

/** A clock the test moves by hand. */
function fakeClock(start = 1_700_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

const roomy: SizingCaps = { have: 0, freeSlots: 1000, memoryAvailableMB: 100_000, memoryReserveMB: 2048, perContainerMB: 64 };
const settings = { periodMs: 10 * SECOND, idleMs: 5 * MINUTE, ceiling: 32 };

describe('DemandHistory', () => {
  it('keeps the peak of creates in one period over the window, per key', () => {
    const clock = fakeClock();
    const demand = new DemandHistory(settings, clock.now);
    expect(demand.peak('k')).toBe(0);
    for (let i = 0; i < 20; i += 1) demand.record('k');
    clock.advance(settings.periodMs);
    for (let i = 0; i < 3; i += 1) demand.record('k');
    demand.record('other');
    expect(demand.peak('k')).toBe(20);
    expect(demand.peak('other')).toBe(1);
    expect(demand.keys().sort()).toEqual(['k', 'other']);
  });

  it('counts a burst that straddles two periods as one (the window slides)', () => {
    const clock = fakeClock(0);
    const demand = new DemandHistory(settings, clock.now);
    clock.advance(settings.periodMs - 50);
    for (let i = 0; i < 3; i += 1) demand.record('k');
    clock.advance(100);
    for (let i = 0; i < 3; i += 1) demand.record('k');
    expect(demand.peak('k')).toBe(6);
    clock.advance(settings.periodMs);
    demand.record('k');
    expect(demand.peak('k')).toBe(6);
  });

  it('forgets demand older than the idle window (a key without any left is gone)', () => {
    const clock = fakeClock();
    const demand = new DemandHistory(settings, clock.now);
    for (let i = 0; i < 20; i += 1) demand.record('k');
    clock.advance(2 * MINUTE);
    demand.record('k');
    clock.advance(3 * MINUTE + settings.periodMs);
    // The burst left the window; the single create two minutes later has not.
    expect(demand.peak('k')).toBe(1);
    clock.advance(2 * MINUTE + settings.periodMs);
    expect(demand.peak('k')).toBe(0);
    expect(demand.keys()).toEqual([]);
  });
});

describe('decideSize', () => {
  it('grows to the peak after a burst and shrinks to the floor after idling for the window', () => {
    const clock = fakeClock();
    const demand = new DemandHistory(settings, clock.now);
    const size = (have: number) => decideSize({ floor: 2, peak: demand.peak('base') }, settings, { ...roomy, have });
    expect(size(2)).toEqual({ size: 2, wanted: 2, reason: 'floor' });
    for (let i = 0; i < 20; i += 1) demand.record('base');
    expect(size(0)).toEqual({ size: 20, wanted: 20, reason: 'demand' });
    // Still wanted a few minutes on (the pool refilled to 20 meanwhile).
    clock.advance(4 * MINUTE);
    expect(size(20)).toEqual({ size: 20, wanted: 20, reason: 'demand' });
    clock.advance(MINUTE + settings.periodMs);
    expect(size(20)).toEqual({ size: 2, wanted: 2, reason: 'floor' });
  });

  it('never goes above the ceiling, nor below a floor above it', () => {
    expect(decideSize({ floor: 0, peak: 100 }, settings, roomy)).toEqual({ size: 32, wanted: 32, reason: 'ceiling' });
    expect(decideSize({ floor: 40, peak: 100 }, settings, roomy)).toEqual({ size: 40, wanted: 40, reason: 'floor' });
    expect(decideSize({ floor: 0, peak: 0 }, settings, roomy)).toEqual({ size: 0, wanted: 0, reason: 'floor' });
  });

  it('keeps a pinned size whatever the demand', () => {
    expect(decideSize({ pinned: 3, floor: 0, peak: 50 }, settings, roomy)).toEqual({ size: 3, wanted: 3, reason: 'pinned' });
    expect(decideSize({ pinned: 3, floor: 0, peak: 0 }, settings, roomy)).toEqual({ size: 3, wanted: 3, reason: 'pinned' });
  });

  it('grows only into free sandbox slots (what it has keeps its slots)', () => {
    expect(decideSize({ floor: 2, peak: 20 }, settings, { ...roomy, have: 4, freeSlots: 6 })).toEqual({ size: 10, wanted: 20, reason: 'sandbox_limit' });
    expect(decideSize({ floor: 2, peak: 20 }, settings, { ...roomy, have: 4, freeSlots: 0 })).toEqual({ size: 4, wanted: 20, reason: 'sandbox_limit' });
    expect(decideSize({ pinned: 5, floor: 0, peak: 0 }, settings, { ...roomy, have: 0, freeSlots: 3 })).toEqual({ size: 3, wanted: 5, reason: 'sandbox_limit' });
  });

  it('grows only into memory above the reserve', () => {
    // (2048 + 5 × 64 + 10) MiB available: room for 5 more containers of 64 MiB.
    const caps = { ...roomy, have: 2, memoryAvailableMB: 2048 + 5 * 64 + 10 };
    expect(decideSize({ floor: 2, peak: 20 }, settings, caps)).toEqual({ size: 7, wanted: 20, reason: 'memory' });
    // Below the reserve: no growth, and no shrinking either (what is there is already counted in MemAvailable).
    expect(decideSize({ floor: 2, peak: 20 }, settings, { ...caps, memoryAvailableMB: 1000 })).toEqual({ size: 2, wanted: 20, reason: 'memory' });
    // The floor is capped too (a machine without memory starts nothing).
    expect(decideSize({ floor: 2, peak: 0 }, settings, { ...caps, have: 0, memoryAvailableMB: 1000 })).toEqual({ size: 0, wanted: 2, reason: 'memory' });
    // Memory unknown (not Linux): no memory cap.
    expect(decideSize({ floor: 2, peak: 20 }, settings, { ...caps, memoryAvailableMB: undefined }).size).toBe(20);
  });

  it('shrinks to what is wanted even when the caps would allow more', () => {
    expect(decideSize({ floor: 2, peak: 3 }, settings, { ...roomy, have: 20, freeSlots: 0, memoryAvailableMB: 0 })).toEqual({ size: 3, wanted: 3, reason: 'demand' });
  });
});
