import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Logger } from '../logger.ts';
import { exitInfo, type ExitInfo } from './exit-status.ts';
import { StdinUnavailableError, TtyUnavailableError, type OutputKind, type ProcessIo } from './process-handle.ts';
import type { LaunchPlan } from './exec-helper.ts';
import { ServedSpawnError, spawnServerFor, type PipeChild } from './spawn-server.ts';

/** How long output may stay silent after the exit before the pipes are abandoned (grandchildren holding them). */
const DRAIN_IDLE_MS = 150;

export interface PipeSpawnOptions {
  cwd: string;
  env: Record<string, string>;
  stdin: boolean;
  logger: Logger;
}

let warnedServerFallback = false;

/**
 * Spawns a process with stdout/stderr pipes and either a stdin pipe or /dev/null: through the
 * helper's spawn server when the plan has one, else (or when the server cannot be used) with
 * Node's own spawn.
 */
export async function spawnPipeProcess(plan: LaunchPlan, opts: PipeSpawnOptions): Promise<ProcessIo> {
  if (plan.served) {
    const { helper, ...who } = plan.served;
    try {
      const child = await spawnServerFor(helper, opts.logger).spawn({ ...who, cwd: opts.cwd, env: opts.env, stdin: opts.stdin });
      return new PipeProcess(child);
    } catch (error) {
      if (error instanceof ServedSpawnError) throw error;
      if (!warnedServerFallback) {
        warnedServerFallback = true;
        opts.logger.warn({ err: error, helper }, 'exec-as-user spawn server unavailable; starting commands through the helper one by one');
      }
    }
  }
  return spawnWithNode(plan, opts);
}

function spawnWithNode(plan: LaunchPlan, opts: PipeSpawnOptions): Promise<ProcessIo> {
  const child = spawn(plan.file, plan.args, {
    cwd: opts.cwd,
    env: opts.env,
    uid: plan.uid,
    gid: plan.gid,
    stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    windowsHide: true,
  });
  if (child.pid === undefined) {
    return new Promise((_resolve, reject) => {
      child.once('error', reject);
    });
  }
  return Promise.resolve(new PipeProcess(nodeChild(child, child.pid)));
}

function nodeChild(child: ChildProcess, pid: number): PipeChild {
  child.on('error', () => {});
  return {
    pid,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    onExit: (listener) => child.once('exit', listener),
    kill: (signal) => void child.kill(signal),
  };
}

class PipeProcess implements ProcessIo {
  readonly isPty = false;
  readonly pid: number;
  private stdinOpen: boolean;
  private paused = false;

  constructor(private readonly child: PipeChild) {
    this.pid = child.pid;
    this.stdinOpen = child.stdin !== null;
    child.stdin?.on('error', () => {
      this.stdinOpen = false;
    });
    child.stdin?.on('close', () => {
      this.stdinOpen = false;
    });
  }

  attach(sink: { data(kind: OutputKind, data: Uint8Array): void; exit(info: ExitInfo): void }): void {
    const child = this.child;
    let exit: ExitInfo | undefined;
    let openStreams = 0;
    let idleTimer: NodeJS.Timeout | undefined;

    const finish = (): void => {
      if (!exit) return;
      clearTimeout(idleTimer);
      const info = exit;
      exit = undefined;
      child.stdout?.destroy();
      child.stderr?.destroy();
      sink.exit(info);
    };
    let chunks = 0;
    const armIdleTimer = (): void => {
      if (!exit) return;
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        if (this.paused) return armIdleTimer();
        // The deadline is wall time, and envd may not have run meanwhile (a CPU-throttled or busy sandbox): a loop
        // turn runs its timers before it reads the pipes. Output already waiting is read first (the pipes are polled
        // before setImmediate callbacks run); only pipes that gave nothing more are abandoned.
        const seen = chunks;
        setImmediate(() => {
          if (chunks === seen) finish();
        });
      }, DRAIN_IDLE_MS);
    };
    const watch = (stream: Readable | null, kind: OutputKind): void => {
      if (!stream) return;
      openStreams++;
      stream.on('data', (chunk: Buffer) => {
        chunks++;
        sink.data(kind, chunk);
        armIdleTimer();
      });
      stream.on('error', () => {});
      stream.once('close', () => {
        openStreams--;
        if (openStreams === 0) finish();
      });
    };
    watch(child.stdout, 'stdout');
    watch(child.stderr, 'stderr');
    child.onExit((code, signal) => {
      this.stdinOpen = false;
      exit = exitInfo(code, signal);
      if (openStreams === 0) finish();
      else armIdleTimer();
    });
  }

  writeStdin(data: Uint8Array): Promise<void> {
    const stdin = this.child.stdin;
    if (!stdin || !this.stdinOpen || stdin.writableEnded || stdin.destroyed) return Promise.reject(new StdinUnavailableError());
    return new Promise((resolve, reject) => {
      stdin.write(data, (error) => (error ? reject(new StdinUnavailableError()) : resolve()));
    });
  }

  writePty(_data: Uint8Array): void {
    throw new TtyUnavailableError();
  }

  closeStdin(): void {
    const stdin = this.child.stdin;
    this.stdinOpen = false;
    if (stdin && !stdin.writableEnded) stdin.end();
  }

  resize(): void {
    throw new TtyUnavailableError();
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  pause(): void {
    this.paused = true;
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  resume(): void {
    this.paused = false;
    this.child.stdout?.resume();
    this.child.stderr?.resume();
  }
}
