import { Code, ConnectError } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { ProcessEventSchema } from '@tidepool/protocol/process';
import type { ExitInfo } from './exit-status.ts';
import type { HandleEvent, ProcessHandle } from './process-handle.ts';

export type ProcessEventInit = MessageInitShape<typeof ProcessEventSchema>;

export function startEvent(pid: number): ProcessEventInit {
  return { event: { case: 'start', value: { pid } } };
}

export function endEvent(exit: ExitInfo): ProcessEventInit {
  return { event: { case: 'end', value: { exitCode: exit.exitCode, exited: exit.exited, status: exit.status, error: exit.error } } };
}

/** Output queued for one slow subscriber above which reading from the process pauses. */
const QUEUE_HIGH_WATER_BYTES = 4 * 1024 * 1024;
const QUEUE_LOW_WATER_BYTES = 1024 * 1024;

const KEEPALIVE: ProcessEventInit = { event: { case: 'keepalive', value: {} } };

function toEvent(event: HandleEvent): ProcessEventInit {
  if (event.type === 'end') return endEvent(event.exit);
  return { event: { case: 'data', value: { output: { case: event.kind, value: event.data } } } };
}

/** True when the handler's signal fired because the call's deadline (`Connect-Timeout-Ms`) ran out. */
export function isDeadlineAbort(signal: AbortSignal): boolean {
  const reason: unknown = signal.reason;
  return signal.aborted && reason instanceof ConnectError && reason.code === Code.DeadlineExceeded;
}

/**
 * A live subscription to one process. Created synchronously (so that it sees every event
 * from that moment on) and consumed by `events()`.
 */
export class ProcessSubscription {
  private readonly queue: HandleEvent[] = [];
  private queuedBytes = 0;
  private throttling = false;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;
  private readonly listener = (event: HandleEvent): void => {
    this.queue.push(event);
    if (event.type === 'data') {
      this.queuedBytes += event.data.length;
      if (!this.throttling && this.queuedBytes > QUEUE_HIGH_WATER_BYTES) {
        this.throttling = true;
        this.handle.setBackpressure(this.listener, true);
      }
    }
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  };

  constructor(private readonly handle: ProcessHandle) {
    this.unsubscribe = handle.subscribe(this.listener);
  }

  private take(): HandleEvent | undefined {
    const event = this.queue.shift();
    if (event?.type === 'data') {
      this.queuedBytes -= event.data.length;
      if (this.throttling && this.queuedBytes < QUEUE_LOW_WATER_BYTES) {
        this.throttling = false;
        this.handle.setBackpressure(this.listener, false);
      }
    }
    return event;
  }

  /**
   * `start{pid}`, then live data and keepalives, then one `end`. A client disconnect ends the
   * stream quietly; the deadline ends it with `deadline_exceeded`. Neither touches the process.
   */
  async *events(signal: AbortSignal, keepaliveMs: number): AsyncGenerator<ProcessEventInit> {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = (): void => this.wakeUp();
    signal.addEventListener('abort', onAbort);
    try {
      yield startEvent(this.handle.pid);
      let idleSince = Date.now();
      for (;;) {
        if (signal.aborted) {
          if (isDeadlineAbort(signal)) throw signal.reason;
          return;
        }
        const next = this.take();
        if (next) {
          yield toEvent(next);
          if (next.type === 'end') return;
          idleSince = Date.now();
          continue;
        }
        const waitMs = idleSince + keepaliveMs - Date.now();
        if (waitMs <= 0) {
          yield KEEPALIVE;
          idleSince = Date.now();
          continue;
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          timer = setTimeout(resolve, waitMs);
        });
        clearTimeout(timer);
        this.wake = undefined;
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.unsubscribe();
    }
  }

  /** Stops listening without consuming (e.g. when the stream is never started). */
  close(): void {
    this.unsubscribe();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** The whole stream of a process that already exited: `start{pid}` then its `end`. */
export async function* replayExit(pid: number, exit: ExitInfo): AsyncGenerator<ProcessEventInit> {
  yield startEvent(pid);
  yield endEvent(exit);
}
