import { Code, ConnectError } from '@connectrpc/connect';
import type { ProcessSelector } from '@tidepool/protocol/process';
import type { ExitInfo } from './exit-status.ts';
import type { ProcessHandle } from './process-handle.ts';

/** How long an exited process stays connectable (Connect replays start + end). */
export const EXIT_RETENTION_MS = 30_000;

export interface RetainedExit {
  pid: number;
  tag: string | undefined;
  exit: ExitInfo;
  sequence: number;
  timer: NodeJS.Timeout;
}

export type Lookup = { live: ProcessHandle } | { exited: RetainedExit };

export function describeSelector(selector: ProcessSelector | undefined): string {
  switch (selector?.selector.case) {
    case 'pid':
      return `process with pid ${selector.selector.value}`;
    case 'tag':
      return `process with tag ${selector.selector.value}`;
    default:
      return 'process';
  }
}

/** Live processes by pid, plus recently exited ones for `Connect`. */
export class ProcessRegistry {
  private readonly live = new Map<number, ProcessHandle>();
  private readonly exited = new Map<number, RetainedExit>();

  constructor(private readonly retentionMs = EXIT_RETENTION_MS) {}

  /** Registers a started process; a reused tag (or pid) forgets the exits retained under it. */
  add(handle: ProcessHandle): void {
    this.forgetExit(handle.pid);
    if (handle.tag !== undefined) {
      for (const retained of [...this.exited.values()]) if (retained.tag === handle.tag) this.forgetExit(retained.pid);
    }
    this.live.set(handle.pid, handle);
    void handle.ended.then((exit) => this.retire(handle, exit));
  }

  list(): ProcessHandle[] {
    return [...this.live.values()].sort((a, b) => a.sequence - b.sequence);
  }

  /** Finds a live process or a retained exit; duplicate tags resolve to the newest start. */
  lookup(selector: ProcessSelector | undefined): Lookup | undefined {
    const sel = selector?.selector;
    if (sel?.case === 'pid') {
      const handle = this.live.get(sel.value);
      if (handle) return { live: handle };
      const retained = this.exited.get(sel.value);
      return retained ? { exited: retained } : undefined;
    }
    if (sel?.case === 'tag') {
      const handle = newest([...this.live.values()].filter((h) => h.tag === sel.value));
      if (handle) return { live: handle };
      const retained = newest([...this.exited.values()].filter((r) => r.tag === sel.value));
      return retained ? { exited: retained } : undefined;
    }
    return undefined;
  }

  /** The live process of a selector, or `not_found`. */
  requireLive(selector: ProcessSelector | undefined): ProcessHandle {
    if (!selector?.selector.case) throw new ConnectError('process selector is required', Code.InvalidArgument);
    const found = this.lookup(selector);
    if (found && 'live' in found) return found.live;
    throw new ConnectError(`${describeSelector(selector)} not found`, Code.NotFound);
  }

  /** Forgets everything (tests, shutdown); does not kill processes. */
  clear(): void {
    for (const retained of this.exited.values()) clearTimeout(retained.timer);
    this.exited.clear();
    this.live.clear();
  }

  private retire(handle: ProcessHandle, exit: ExitInfo): void {
    if (this.live.get(handle.pid) !== handle) return;
    this.live.delete(handle.pid);
    const timer = setTimeout(() => this.forgetExit(handle.pid), this.retentionMs);
    timer.unref();
    this.exited.set(handle.pid, { pid: handle.pid, tag: handle.tag, exit, sequence: handle.sequence, timer });
  }

  private forgetExit(pid: number): void {
    const retained = this.exited.get(pid);
    if (!retained) return;
    clearTimeout(retained.timer);
    this.exited.delete(pid);
  }
}

function newest<T extends { sequence: number }>(items: T[]): T | undefined {
  let best: T | undefined;
  for (const item of items) if (!best || item.sequence > best.sequence) best = item;
  return best;
}
