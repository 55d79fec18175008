import type { ProcessConfig } from '@tidepool/protocol/process';
import type { ExitInfo } from './exit-status.ts';

export type OutputKind = 'stdout' | 'stderr' | 'pty';

export type HandleEvent =
  | { type: 'data'; kind: OutputKind; data: Uint8Array }
  | { type: 'end'; exit: ExitInfo };

export type HandleListener = (event: HandleEvent) => void;

/** The OS side of a running process: pipes or a pseudo-terminal. */
export interface ProcessIo {
  readonly pid: number;
  readonly isPty: boolean;
  /** Starts delivering output and the exit; called exactly once. */
  attach(sink: { data(kind: OutputKind, data: Uint8Array): void; exit(info: ExitInfo): void }): void;
  /** Writes to the stdin pipe; throws `StdinUnavailableError` when there is none or it is closed. */
  writeStdin(data: Uint8Array): Promise<void>;
  /** Writes to the terminal; throws `TtyUnavailableError` for pipe processes. */
  writePty(data: Uint8Array): void;
  /** Sends EOF on the stdin pipe (no-op when already closed or never opened). */
  closeStdin(): void;
  resize(cols: number, rows: number): void;
  signal(signal: NodeJS.Signals): void;
  /** Stops reading output (backpressure from slow subscribers) until `resume()`. */
  pause(): void;
  resume(): void;
}

export class StdinUnavailableError extends Error {
  constructor() {
    super('stdin not enabled or closed');
  }
}

export class TtyUnavailableError extends Error {
  constructor() {
    super('tty not assigned to process');
  }
}

export interface ProcessHandleInit {
  io: ProcessIo;
  config: ProcessConfig;
  tag?: string;
  /** Largest data chunk handed to subscribers. */
  maxChunkBytes: number;
}

let nextSequence = 0;

/**
 * One started process: fans its output and exit out to the current subscribers.
 * Events that happen before `release()` are held back, so that the starter can register the
 * process and subscribe first; after that, output nobody listens to is dropped.
 */
export class ProcessHandle {
  readonly pid: number;
  readonly tag: string | undefined;
  readonly config: ProcessConfig;
  readonly isPty: boolean;
  /** Start order, to resolve duplicate tags deterministically (newest wins). */
  readonly sequence = ++nextSequence;
  readonly ended: Promise<ExitInfo>;

  private readonly io: ProcessIo;
  private readonly maxChunkBytes: number;
  private readonly listeners = new Set<HandleListener>();
  private readonly pausers = new Set<object>();
  private held: HandleEvent[] | undefined = [];
  private exitInfo: ExitInfo | undefined;
  private resolveEnded!: (info: ExitInfo) => void;

  constructor(init: ProcessHandleInit) {
    this.io = init.io;
    this.pid = init.io.pid;
    this.isPty = init.io.isPty;
    this.tag = init.tag;
    this.config = init.config;
    this.maxChunkBytes = init.maxChunkBytes;
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
    this.io.attach({
      data: (kind, data) => this.onData(kind, data),
      exit: (info) => this.onExit(info),
    });
  }

  get exit(): ExitInfo | undefined {
    return this.exitInfo;
  }

  /** Adds a listener; returns the function that removes it. */
  subscribe(listener: HandleListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      this.setBackpressure(listener, false);
    };
  }

  /** A subscriber that falls behind holds output reading until it catches up. */
  setBackpressure(owner: object, on: boolean): void {
    const before = this.pausers.size;
    if (on) this.pausers.add(owner);
    else this.pausers.delete(owner);
    if (before === 0 && this.pausers.size > 0) this.io.pause();
    else if (before > 0 && this.pausers.size === 0) this.io.resume();
  }

  /** Delivers what was held back since the spawn and switches to live delivery. */
  release(): void {
    const held = this.held;
    this.held = undefined;
    for (const event of held ?? []) this.dispatch(event);
  }

  writeStdin(data: Uint8Array): Promise<void> {
    if (this.exitInfo) return Promise.reject(new StdinUnavailableError());
    return this.io.writeStdin(data);
  }

  writePty(data: Uint8Array): void {
    if (!this.isPty) throw new TtyUnavailableError();
    if (this.exitInfo) return;
    this.io.writePty(data);
  }

  closeStdin(): void {
    this.io.closeStdin();
  }

  resize(cols: number, rows: number): void {
    if (!this.isPty) throw new TtyUnavailableError();
    if (this.exitInfo) return;
    this.io.resize(cols, rows);
  }

  /** Signals the process itself (not its group); a no-op once it has exited. */
  signal(signal: NodeJS.Signals): void {
    if (this.exitInfo) return;
    this.io.signal(signal);
  }

  private onData(kind: OutputKind, data: Uint8Array): void {
    for (let offset = 0; offset < data.length; offset += this.maxChunkBytes) {
      const chunk = data.subarray(offset, Math.min(data.length, offset + this.maxChunkBytes));
      this.emit({ type: 'data', kind, data: chunk });
    }
  }

  private onExit(info: ExitInfo): void {
    if (this.exitInfo) return;
    this.exitInfo = info;
    this.emit({ type: 'end', exit: info });
    this.resolveEnded(info);
  }

  private emit(event: HandleEvent): void {
    if (this.held) this.held.push(event);
    else this.dispatch(event);
  }

  private dispatch(event: HandleEvent): void {
    for (const listener of [...this.listeners]) listener(event);
  }
}
