import * as nodePty from 'node-pty';
import { exitInfo, type ExitInfo } from './exit-status.ts';
import { StdinUnavailableError, type OutputKind, type ProcessIo } from './process-handle.ts';
import type { LaunchPlan } from './exec-helper.ts';

export interface PtySpawnOptions {
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

/** Spawns a process on a fresh pseudo-terminal; stdout and stderr arrive merged as `pty` output. */
export function spawnPtyProcess(plan: LaunchPlan, opts: PtySpawnOptions): ProcessIo {
  const term = nodePty.spawn(plan.file, plan.args, {
    cwd: opts.cwd,
    env: opts.env,
    cols: opts.cols > 0 ? opts.cols : 80,
    rows: opts.rows > 0 ? opts.rows : 24,
    encoding: null,
    uid: plan.uid,
    gid: plan.gid,
  });
  return new PtyProcess(term);
}

class PtyProcess implements ProcessIo {
  readonly isPty = true;
  readonly pid: number;
  private exited = false;

  constructor(private readonly term: nodePty.IPty) {
    this.pid = term.pid;
  }

  attach(sink: { data(kind: OutputKind, data: Uint8Array): void; exit(info: ExitInfo): void }): void {
    // With `encoding: null` node-pty hands out Buffers, typed as string.
    this.term.onData((data: string | Buffer) => {
      sink.data('pty', typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    });
    this.term.onExit(({ exitCode, signal }) => {
      this.exited = true;
      sink.exit(exitInfo(exitCode, signal ? signal : null));
    });
  }

  writeStdin(): Promise<void> {
    return Promise.reject(new StdinUnavailableError());
  }

  writePty(data: Uint8Array): void {
    this.term.write(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }

  closeStdin(): void {
    throw new Error('cannot close stdin of a PTY process; send Ctrl-D (0x04) as pty input instead');
  }

  resize(cols: number, rows: number): void {
    if (cols > 0 && rows > 0) this.term.resize(cols, rows);
  }

  signal(signal: NodeJS.Signals): void {
    if (this.exited) return;
    process.kill(this.pid, signal);
  }
}
