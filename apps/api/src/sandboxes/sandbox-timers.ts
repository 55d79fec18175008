import type { SandboxRecord } from './sandbox-record.ts';

const SWEEP_INTERVAL_MS = 500;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One timer per running sandbox, fired at its `endAt`, plus a sweep every 500 ms as a safety net
 * (timers longer than ~24 days, clock jumps), so a timeout is enforced within a second.
 */
export class SandboxTimers {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private sweep: NodeJS.Timeout | undefined;

  constructor(private readonly onExpire: (sandboxId: string) => void) {}

  arm(record: SandboxRecord): void {
    this.clear(record.sandboxId);
    if (record.state !== 'running') return;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Date.parse(record.endAt) - Date.now()));
    const timer = setTimeout(() => {
      this.timers.delete(record.sandboxId);
      this.onExpire(record.sandboxId);
    }, delay);
    timer.unref();
    this.timers.set(record.sandboxId, timer);
  }

  clear(sandboxId: string): void {
    clearTimeout(this.timers.get(sandboxId));
    this.timers.delete(sandboxId);
  }

  startSweep(running: () => SandboxRecord[]): void {
    this.sweep = setInterval(() => {
      const now = Date.now();
      for (const record of running()) if (Date.parse(record.endAt) <= now) this.onExpire(record.sandboxId);
    }, SWEEP_INTERVAL_MS);
    this.sweep.unref();
  }

  stopAll(): void {
    clearInterval(this.sweep);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
