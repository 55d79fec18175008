import type { SandboxRecord } from '../registry/sandbox-record.ts';

const SWEEP_INTERVAL_MS = 500;
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A timeout action that failed is retried after 1 s, 2 s, 4 s … at most this long apart. */
export const MAX_RETRY_DELAY_MS = 30_000;
const FIRST_RETRY_DELAY_MS = 1_000;

export interface RetryPlan {
  /** How many times the action has failed in a row. */
  attempt: number;
  delayMs: number;
}

/**
 * One timer per running sandbox, fired at its `endAt`, plus a sweep every 500 ms as a safety net
 * (timers longer than ~24 days, clock jumps), so a timeout is enforced within a second.
 */
export class SandboxTimers {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private sweep: NodeJS.Timeout | undefined;
  /** Sandboxes whose timeout action failed: when it may run again, and how often it failed. */
  private readonly retries = new Map<string, { attempt: number; notBefore: number }>();

  constructor(private readonly onExpire: (sandboxId: string) => void) {}

  arm(record: SandboxRecord): void {
    this.clear(record.sandboxId);
    if (record.state !== 'running') return;
    const endAt = Date.parse(record.endAt);
    // A new end in the future (extended, resumed) starts the backoff over.
    if (endAt > Date.now()) this.retries.delete(record.sandboxId);
    const notBefore = Math.max(endAt, this.retries.get(record.sandboxId)?.notBefore ?? 0);
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, notBefore - Date.now()));
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

  /** The timeout action failed: it runs again after an exponential backoff (the sweep waits too). */
  failed(record: SandboxRecord): RetryPlan {
    const attempt = (this.retries.get(record.sandboxId)?.attempt ?? 0) + 1;
    const delayMs = Math.min(MAX_RETRY_DELAY_MS, FIRST_RETRY_DELAY_MS * 2 ** (attempt - 1));
    this.retries.set(record.sandboxId, { attempt, notBefore: Date.now() + delayMs });
    this.arm(record);
    return { attempt, delayMs };
  }

  /** The sandbox is gone or its timeout action succeeded. */
  forget(sandboxId: string): void {
    this.clear(sandboxId);
    this.retries.delete(sandboxId);
  }

  /** False while a failed timeout action waits out its backoff (a timer and the sweep may both fire). */
  due(sandboxId: string, now = Date.now()): boolean {
    return (this.retries.get(sandboxId)?.notBefore ?? 0) <= now;
  }

  startSweep(running: () => SandboxRecord[]): void {
    this.sweep = setInterval(() => {
      const now = Date.now();
      for (const record of running()) if (Date.parse(record.endAt) <= now && this.due(record.sandboxId, now)) this.onExpire(record.sandboxId);
    }, SWEEP_INTERVAL_MS);
    this.sweep.unref();
  }

  stopAll(): void {
    clearInterval(this.sweep);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.retries.clear();
  }
}
