import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { describeExit, exited, killGroup } from './child-process-tree.ts';
import { type ExecuteRequest, type ExecutionSink, INTERPRETER_ERROR_NAME, type Kernel } from './kernel.ts';

export interface BashKernelOptions {
  bash: string;
  cwd: string;
  logger: Logger;
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Single-quotes a string for bash (`'` becomes `'\''`). */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

// Defined once in the shell: runs one cell with its environment variables, reverts them, then prints the
// cell's marker (with the exit status on stdout) on both streams so the server knows where the cell ends.
const RUNNER = String.raw`
__tidepool_run() {
  local __tp_code=$1 __tp_marker=$2 __tp_kv __tp_key __tp_status
  shift 2
  local -a __tp_restore=()
  for __tp_kv in "$@"; do
    __tp_key=${"$"}{__tp_kv%%=*}
    if [[ -v $__tp_key ]]; then __tp_restore+=("export $__tp_key=$(printf '%q' "${"$"}{!__tp_key}")"); else __tp_restore+=("unset $__tp_key"); fi
    export "$__tp_kv"
  done
  eval "$__tp_code" </dev/null
  __tp_status=$?
  for __tp_kv in "${"$"}{__tp_restore[@]}"; do eval "$__tp_kv"; done
  printf '\n%s %d\n' "$__tp_marker" "$__tp_status"
  printf '\n%s\n' "$__tp_marker" >&2
}
`;

interface Running {
  marker: string;
  sink: ExecutionSink;
  stdoutDone: boolean;
  stderrDone: boolean;
  status: number | undefined;
  finish: () => void;
}

/**
 * A bash context: one long-lived non-interactive bash (variables, functions and `cd` carry over). A cell is
 * `eval`ed by a function defined at start; a random marker printed after it ends the cell on each stream.
 * An interrupt kills the shell and its children (bash cannot be interrupted and go on reliably); the context
 * then starts a fresh shell, which the error says.
 */
export class BashKernel implements Kernel {
  private child: ChildProcess | undefined;
  private running: Running | undefined;
  private exitedAt: string | undefined;
  private count = 0;
  private buffers = { stdout: '', stderr: '' };

  constructor(private readonly options: BashKernelOptions) {}

  get alive(): boolean {
    return this.child !== undefined && this.exitedAt === undefined;
  }

  async start(): Promise<void> {
    const child = spawn(this.options.bash, ['--noprofile', '--norc', '-s'], { cwd: this.options.cwd, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    child.stdin!.on('error', () => undefined);
    child.stdout!.on('data', (chunk: Buffer) => this.onOutput('stdout', chunk.toString('utf8')));
    child.stderr!.on('data', (chunk: Buffer) => this.onOutput('stderr', chunk.toString('utf8')));
    child.on('exit', (code, signal) => this.onExit(describeExit(code, signal)));
    child.on('error', (error) => this.onExit(`could not be started: ${error.message}`));
    child.stdin!.write(RUNNER);
  }

  execute(request: ExecuteRequest, sink: ExecutionSink, signal: AbortSignal): Promise<void> {
    if (!this.alive) {
      sink.error(INTERPRETER_ERROR_NAME, `the bash shell is not running (${this.exitedAt ?? 'not started'})`, '');
      return Promise.resolve();
    }
    if (request.code.includes('\0')) {
      sink.error('SyntaxError', 'the code contains a NUL character, which bash cannot run', '');
      return Promise.resolve();
    }
    const marker = `__tidepool_end_${randomBytes(12).toString('hex')}`;
    this.count += 1;
    sink.executionCount(this.count);
    const env = { ...request.env.global, ...request.env.execution };
    // Only names bash can export (the sandbox's global variables are not checked by anyone before).
    const pairs = Object.entries(env)
      .filter(([key, value]) => SHELL_NAME.test(key) && !value.includes('\0'))
      .map(([key, value]) => shellQuote(`${key}=${value}`));
    return new Promise<void>((resolve) => {
      const onAbort = () => {
        this.exitedAt = 'the shell was killed to interrupt the code';
        if (this.child) killGroup(this.child);
      };
      this.running = {
        marker,
        sink,
        stdoutDone: false,
        stderrDone: false,
        status: undefined,
        finish: () => {
          signal.removeEventListener('abort', onAbort);
          this.running = undefined;
          resolve();
        },
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      this.child!.stdin!.write(`__tidepool_run ${shellQuote(request.code)} ${marker} ${pairs.join(' ')}\n`);
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    killGroup(child);
    await exited(child);
  }

  private onOutput(stream: 'stdout' | 'stderr', text: string): void {
    const running = this.running;
    if (!running) return;
    let buffer = this.buffers[stream] + text;
    const end = stream === 'stdout' ? new RegExp(`\\n${running.marker} (\\d+)\\n`) : new RegExp(`\\n${running.marker}\\n`);
    const found = end.exec(buffer);
    if (found) {
      this.emit(stream, running.sink, buffer.slice(0, found.index));
      this.buffers[stream] = '';
      if (stream === 'stdout') {
        running.status = Number(found[1]);
        running.stdoutDone = true;
      } else {
        running.stderrDone = true;
      }
      if (running.stdoutDone && running.stderrDone) {
        if (running.status !== 0) running.sink.error('ExitCodeError', `the code exited with status ${running.status}`, '');
        running.finish();
      }
      return;
    }
    // Keep back what could be the start of the marker line; send the rest now.
    const keep = running.marker.length + 16;
    if (buffer.length > keep) {
      this.emit(stream, running.sink, buffer.slice(0, buffer.length - keep));
      buffer = buffer.slice(buffer.length - keep);
    }
    this.buffers[stream] = buffer;
  }

  private emit(stream: 'stdout' | 'stderr', sink: ExecutionSink, text: string): void {
    if (text.length === 0) return;
    if (stream === 'stdout') sink.stdout(text);
    else sink.stderr(text);
  }

  private onExit(how: string): void {
    if (this.exitedAt === undefined) this.exitedAt = `the bash shell ${how}`;
    const running = this.running;
    if (running) {
      for (const stream of ['stdout', 'stderr'] as const) this.emit(stream, running.sink, this.buffers[stream]);
      running.sink.error(INTERPRETER_ERROR_NAME, `${this.exitedAt} while running this code: its state is lost (the next execution starts a fresh shell)`, '');
      running.finish();
    }
    this.buffers = { stdout: '', stderr: '' };
  }
}
