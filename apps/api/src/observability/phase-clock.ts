import { performance } from 'node:perf_hooks';

/**
 * Milliseconds spent in each consecutive phase of one operation (e.g. a sandbox's create, start,
 * envd wait, /init), for debug logs and benchmarks: `mark(name)` closes the phase that ran since
 * the previous mark.
 */
export class PhaseClock {
  private last = performance.now();
  private readonly began = this.last;
  private readonly phases: Record<string, number> = {};

  mark(name: string): void {
    const now = performance.now();
    this.phases[name] = (this.phases[name] ?? 0) + (now - this.last);
    this.last = now;
  }

  /** The phases so far plus `total` (ms since the clock was made), to 0.1 ms. */
  done(): Record<string, number> {
    const tenth = (ms: number): number => Math.round(ms * 10) / 10;
    const out: Record<string, number> = {};
    for (const [name, ms] of Object.entries(this.phases)) out[name] = tenth(ms);
    out.total = tenth(performance.now() - this.began);
    return out;
  }
}
