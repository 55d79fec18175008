import { type ChildProcess, spawn } from 'node:child_process';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { bundleFromMime } from '../protocol/frames.ts';
import { LineSplitter } from '../protocol/line-splitter.ts';
import { describeExit, exited, killGroup } from './child-process-tree.ts';
import { type ExecuteRequest, type ExecutionSink, INTERPRETER_ERROR_NAME, InterpreterError, type Kernel } from './kernel.ts';
import { interruptibleExecution } from './interruptible-execution.ts';

export interface PythonKernelOptions {
  python: string;
  /** python/kernel_bridge.py and python/kernel_setup.py as installed next to the server. */
  bridgePath: string;
  setupPath: string;
  cwd: string;
  /** Longest text of one output message the bridge relays (characters); the rest is cut with a note. */
  maxTextChars: number;
  startTimeoutMs: number;
  /** How long an interrupted execution may take to stop before the kernel is killed. */
  interruptGraceMs: number;
  logger: Logger;
}

type BridgeEvent =
  | { ev: 'ready' }
  | { ev: 'fatal'; message: string }
  | { ev: 'stream'; id: number; name: string; text: string }
  | { ev: 'result'; id: number; data: Record<string, unknown>; main: boolean }
  | { ev: 'error'; id: number; name: string; value: string; traceback: string }
  | { ev: 'count'; id: number; count: number }
  | { ev: 'done'; id: number; problem?: string };

const isString = (v: unknown): v is string => typeof v === 'string';
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * One line of the bridge, checked. The bridge builds the events, but their contents come from kernel messages,
 * which code in the kernel can forge: a field of the wrong type makes the whole line be ignored.
 */
export function parseBridgeEvent(line: string): BridgeEvent | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!isRecord(raw)) return undefined;
  const id = raw.id;
  const hasId = Number.isSafeInteger(id);
  switch (raw.ev) {
    case 'ready':
      return { ev: 'ready' };
    case 'fatal':
      return isString(raw.message) ? { ev: 'fatal', message: raw.message } : undefined;
    case 'stream':
      return hasId && isString(raw.name) && isString(raw.text) ? { ev: 'stream', id: id as number, name: raw.name, text: raw.text } : undefined;
    case 'result':
      return hasId && isRecord(raw.data) && typeof raw.main === 'boolean' ? { ev: 'result', id: id as number, data: raw.data, main: raw.main } : undefined;
    case 'error':
      return hasId && isString(raw.name) && isString(raw.value) && isString(raw.traceback)
        ? { ev: 'error', id: id as number, name: raw.name, value: raw.value, traceback: raw.traceback }
        : undefined;
    case 'count':
      return hasId && Number.isSafeInteger(raw.count) ? { ev: 'count', id: id as number, count: raw.count as number } : undefined;
    case 'done':
      if (!hasId) return undefined;
      return isString(raw.problem) ? { ev: 'done', id: id as number, problem: raw.problem } : { ev: 'done', id: id as number };
    default:
      return undefined;
  }
}

interface Running {
  id: number;
  sink: ExecutionSink;
  finish: () => void;
}

/** Longest line the bridge may send (a result with a large image); longer lines are dropped with a note. */
const MAX_BRIDGE_LINE_BYTES = 64 * 1024 * 1024;

/**
 * A Python context: python/kernel_bridge.py, a process running ipykernel's in-process kernel, spoken to in JSON
 * lines over a socket on its fd 3. Interrupts are SIGINT to its process group (as jupyter_client interrupts a
 * kernel: processes the code started get it too); it and everything it started are killed by group.
 */
export class PythonKernel implements Kernel {
  private child: ChildProcess | undefined;
  private channel: Duplex | undefined;
  private running: Running | undefined;
  private nextId = 1;
  private exitedAt: string | undefined;
  private onReady: ((error?: Error) => void) | undefined;
  private pendingMove: { id: number; settle: (problem?: string) => void } | undefined;

  constructor(private readonly options: PythonKernelOptions) {}

  get alive(): boolean {
    return this.child !== undefined && this.exitedAt === undefined;
  }

  start(): Promise<void> {
    const { options } = this;
    const child = spawn(options.python, [options.bridgePath, '--cwd', options.cwd, '--setup', options.setupPath, '--max-text', String(options.maxTextChars)], {
      cwd: options.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    const channel = child.stdio[3] as Duplex;
    this.channel = channel;
    const lines = new LineSplitter((line) => this.onLine(line), MAX_BRIDGE_LINE_BYTES, (bytes) => {
      this.running?.sink.stderr(`[code-interpreter] an output of ${bytes} bytes was dropped: it is larger than ${MAX_BRIDGE_LINE_BYTES} bytes\n`);
    });
    channel.on('data', (chunk: Buffer) => lines.push(chunk));
    channel.on('error', () => undefined);
    // The bridge's fd 1 and 2 until its kernel runs (Python's own errors); after that they lead into the kernel.
    for (const stream of [child.stdout!, child.stderr!]) {
      const output = new LineSplitter((line) => options.logger.debug({ line: line.slice(0, 2000) }, 'python kernel output'), 64 * 1024);
      stream.on('data', (chunk: Buffer) => output.push(chunk));
    }
    child.on('exit', (code, signal) => this.onExit(describeExit(code, signal)));
    child.on('error', (error) => this.onExit(`could not be started: ${error.message}`));

    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.onReady = undefined;
        void this.stop();
        reject(new InterpreterError(`the Python kernel did not start within ${options.startTimeoutMs / 1000} s`));
      }, options.startTimeoutMs);
      this.onReady = (error) => {
        clearTimeout(timer);
        this.onReady = undefined;
        if (error) reject(error);
        else resolve();
      };
    });
  }

  execute(request: ExecuteRequest, sink: ExecutionSink, signal: AbortSignal): Promise<void> {
    if (!this.alive) {
      sink.error(INTERPRETER_ERROR_NAME, `the Python kernel is not running (${this.exitedAt ?? 'not started'})`, '');
      return Promise.resolve();
    }
    const id = this.nextId++;
    const policy = {
      signal,
      graceMs: this.options.interruptGraceMs,
      interrupt: () => {
        if (this.child && this.exitedAt === undefined) killGroup(this.child, 'SIGINT');
      },
      kill: () => {
        this.options.logger.warn({ graceMs: this.options.interruptGraceMs }, 'python kernel ignored an interrupt; killing it');
        this.exitedAt = `the code did not stop within ${this.options.interruptGraceMs / 1000} s of an interrupt, so the Python kernel was killed`;
        this.kill();
      },
    };
    return interruptibleExecution(policy, (finish) => {
      this.running = {
        id,
        sink,
        finish: () => {
          this.running = undefined;
          finish();
        },
      };
      this.send({ op: 'execute', id, code: request.code, env: request.env });
    });
  }

  relocate(cwd: string): Promise<void> {
    if (!this.alive) return Promise.reject(new InterpreterError(`the Python kernel is not running (${this.exitedAt ?? 'not started'})`));
    if (this.running) return Promise.reject(new InterpreterError('the Python kernel is busy'));
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.pendingMove = { id, settle: (problem) => (problem ? reject(new InterpreterError(`could not move the Python kernel to ${cwd}: ${problem}`)) : resolve()) };
      this.send({ op: 'chdir', id, cwd });
    });
  }

  /** Closes the channel (the bridge then shuts its kernel down and exits); kills what is left after 3 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (this.exitedAt === undefined) {
      this.channel?.end();
      const timer = setTimeout(() => this.kill(), 3000);
      await exited(child);
      clearTimeout(timer);
    }
    // Processes the code started may outlive the bridge in its group.
    this.kill();
  }

  private kill(): void {
    if (this.child) killGroup(this.child);
  }

  private send(message: unknown): void {
    const channel = this.channel;
    if (channel && !channel.destroyed && this.exitedAt === undefined) channel.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    const event = parseBridgeEvent(line);
    if (!event) {
      this.options.logger.warn({ line: line.slice(0, 200) }, 'python bridge wrote a malformed line; ignored');
      return;
    }
    if (event.ev === 'ready') {
      this.onReady?.();
      return;
    }
    if (event.ev === 'fatal') {
      this.onReady?.(new InterpreterError(event.message));
      return;
    }
    if (event.ev === 'done' && this.pendingMove?.id === event.id) {
      const move = this.pendingMove;
      this.pendingMove = undefined;
      move.settle(event.problem ?? undefined);
      return;
    }
    const running = this.running;
    if (!running || event.id !== running.id) return;
    switch (event.ev) {
      case 'stream':
        if (event.name === 'stderr') running.sink.stderr(event.text);
        else running.sink.stdout(event.text);
        break;
      case 'result':
        running.sink.result(bundleFromMime(event.data), event.main);
        break;
      case 'error':
        running.sink.error(event.name, event.value, event.traceback);
        break;
      case 'count':
        running.sink.executionCount(event.count);
        break;
      case 'done':
        running.finish();
        break;
    }
  }

  private onExit(how: string): void {
    if (this.exitedAt === undefined) this.exitedAt = `the Python kernel ${how}`;
    this.kill();
    this.onReady?.(new InterpreterError(`the Python kernel did not start: ${this.exitedAt}`));
    this.pendingMove?.settle(this.exitedAt);
    this.pendingMove = undefined;
    if (this.running) {
      this.running.sink.error(INTERPRETER_ERROR_NAME, `${this.exitedAt} while running this code: its state is lost (the next execution starts a fresh kernel)`, '');
      this.running.finish();
    }
  }
}
