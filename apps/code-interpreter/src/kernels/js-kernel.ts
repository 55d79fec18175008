import { type ChildProcess, fork } from 'node:child_process';
import type { Logger } from 'pino';
import { asWorkerEvent, type WorkerRequest } from '../worker/worker-messages.ts';
import { describeExit, exited, killGroup } from './child-process-tree.ts';
import { type ExecuteRequest, type ExecutionSink, INTERPRETER_ERROR_NAME, InterpreterError, type Kernel } from './kernel.ts';
import { interruptibleExecution } from './interruptible-execution.ts';

export interface JsKernelOptions {
  language: 'javascript' | 'typescript';
  /** The bundled worker (js-worker.mjs), run by this server's own Node. */
  workerPath: string;
  cwd: string;
  startTimeoutMs: number;
  interruptGraceMs: number;
  logger: Logger;
}

interface Running {
  id: number;
  sink: ExecutionSink;
  finish: () => void;
}

/**
 * A JavaScript or TypeScript context: a Node process of its own (worker/js-worker.ts) whose global scope
 * holds the context's state. Requests and events go over Node's IPC channel; what the worker's children
 * write to the inherited stdout/stderr is relayed as output of the running execution.
 */
export class JsKernel implements Kernel {
  private child: ChildProcess | undefined;
  private running: Running | undefined;
  private nextId = 1;
  private exitedAt: string | undefined;
  private onReady: ((error?: Error) => void) | undefined;

  constructor(private readonly options: JsKernelOptions) {}

  get alive(): boolean {
    return this.child !== undefined && this.exitedAt === undefined;
  }

  start(): Promise<void> {
    const { options } = this;
    const child = fork(options.workerPath, [options.language], {
      cwd: options.cwd,
      detached: true,
      execArgv: [],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
    });
    this.child = child;
    child.on('message', (raw: unknown) => {
      const event = asWorkerEvent(raw);
      if (event) this.onEvent(event);
      else options.logger.debug('javascript worker sent a malformed message; ignored');
    });
    child.stdout!.on('data', (chunk: Buffer) => this.running?.sink.stdout(chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => {
      if (this.running) this.running.sink.stderr(chunk.toString('utf8'));
      else options.logger.warn({ stderr: chunk.toString('utf8').slice(0, 2000) }, 'javascript worker stderr');
    });
    child.on('exit', (code, signal) => this.onExit(describeExit(code, signal)));
    child.on('error', (error) => this.onExit(`could not be started: ${error.message}`));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.onReady = undefined;
        void this.stop();
        reject(new InterpreterError(`the ${options.language} worker did not start within ${options.startTimeoutMs / 1000} s`));
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
      sink.error(INTERPRETER_ERROR_NAME, `the ${this.options.language} worker is not running (${this.exitedAt ?? 'not started'})`, '');
      return Promise.resolve();
    }
    const id = this.nextId++;
    const message: WorkerRequest = { op: 'execute', id, code: request.code, env: request.env };
    const policy = {
      signal,
      graceMs: this.options.interruptGraceMs,
      interrupt: () => this.child?.kill('SIGINT'),
      kill: () => {
        this.exitedAt = `the code did not stop within ${this.options.interruptGraceMs / 1000} s of an interrupt, so the ${this.options.language} worker was killed`;
        this.options.logger.warn({ graceMs: this.options.interruptGraceMs }, 'javascript worker ignored an interrupt; killing it');
        if (this.child) killGroup(this.child);
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
      this.child!.send(message);
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    killGroup(child);
    await exited(child);
  }

  private onEvent(event: NonNullable<ReturnType<typeof asWorkerEvent>>): void {
    if (event.ev === 'ready') {
      this.onReady?.();
      return;
    }
    const running = this.running;
    if (!running) return;
    switch (event.ev) {
      case 'stdout':
        running.sink.stdout(event.text);
        break;
      case 'stderr':
        running.sink.stderr(event.text);
        break;
      case 'result':
        running.sink.result(event.bundle, event.main);
        break;
      case 'error':
        running.sink.error(event.name, event.value, event.traceback);
        break;
      case 'count':
        running.sink.executionCount(event.count);
        break;
      case 'done':
        if (event.id === running.id) running.finish();
        break;
    }
  }

  private onExit(how: string): void {
    if (this.exitedAt === undefined) this.exitedAt = `the ${this.options.language} worker ${how}`;
    this.onReady?.(new InterpreterError(`the ${this.options.language} worker did not start: ${this.exitedAt}`));
    if (this.running) {
      this.running.sink.error(INTERPRETER_ERROR_NAME, `${this.exitedAt} while running this code: its state is lost (the next execution starts a fresh one)`, '');
      this.running.finish();
    }
  }
}
