import { describe, expect, it } from 'vitest';
import { FirstUseTracker } from './first-use-tracker.ts';

describe('FirstUseTracker', () => {
  it('awaits a new sandbox until its first exchange ends', () => {
    let now = 0;
    const tracker = new FirstUseTracker(3_000, () => now);
    expect(tracker.awaiting()).toBe(false);
    tracker.created('a');
    tracker.created('b');
    now = 500;
    expect(tracker.awaiting()).toBe(true);
    tracker.served('a');
    expect(tracker.awaiting()).toBe(true);
    tracker.served('b');
    expect(tracker.awaiting()).toBe(false);
    // Later exchanges (and unknown ids) change nothing.
    tracker.served('a');
    tracker.served('zzz');
    expect(tracker.awaiting()).toBe(false);
  });

  it('lets a sandbox that is never called lapse after the wait', () => {
    let now = 0;
    const tracker = new FirstUseTracker(3_000, () => now);
    tracker.created('silent');
    now = 2_999;
    expect(tracker.awaiting()).toBe(true);
    now = 3_000;
    expect(tracker.awaiting()).toBe(false);
    // A newer create still counts while the lapsed one is gone.
    tracker.created('next');
    now = 3_100;
    expect(tracker.awaiting()).toBe(true);
  });

  it('does not grow with sandboxes that are never called, even when nobody asks', () => {
    let now = 0;
    const tracker = new FirstUseTracker(3_000, () => now);
    for (let i = 0; i < 1_000; i += 1) {
      tracker.created(`s${i}`);
      now += 100;
    }
    // Only those of the last 3 s remain (30 of them, and the newest).
    expect(tracker.size).toBeLessThanOrEqual(31);
  });
});
