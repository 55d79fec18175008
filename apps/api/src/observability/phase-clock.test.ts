import { describe, expect, it } from 'vitest';
import { PhaseClock } from './phase-clock.ts';

const busy = (ms: number): void => {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin: timers are too coarse for a few ms
  }
};

describe('PhaseClock', () => {
  it('attributes the time between marks to each phase and reports the total', () => {
    const clock = new PhaseClock();
    busy(5);
    clock.mark('first');
    busy(15);
    clock.mark('second');
    const phases = clock.done();
    expect(Object.keys(phases)).toEqual(['first', 'second', 'total']);
    expect(phases.first).toBeGreaterThanOrEqual(5);
    expect(phases.second).toBeGreaterThanOrEqual(15);
    expect(phases.second).toBeGreaterThan(phases.first);
    expect(phases.total).toBeGreaterThanOrEqual(phases.first + phases.second - 0.2);
  });

  it('adds up a phase marked more than once', () => {
    const clock = new PhaseClock();
    busy(3);
    clock.mark('wait');
    busy(3);
    clock.mark('wait');
    expect(clock.done().wait).toBeGreaterThanOrEqual(6);
  });
});
