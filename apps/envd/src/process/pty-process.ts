import { closeSync, constants as fsConstants, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as NodePty from 'node-pty';
import { exitInfo, type ExitInfo } from './exit-status.ts';
import { StdinUnavailableError, type OutputKind, type ProcessIo } from './process-handle.ts';
import type { LaunchPlan } from './exec-helper.ts';

/** Output silence after the exit before the end is reported. */
const EXIT_QUIET_MS = 50;

let loadedPty: typeof NodePty | undefined;

/**
 * node-pty, loaded on the first PTY start: its addon and libstdc++ cost ~3 MB of RSS that an envd
 * that never opens a terminal does not need. It is CommonJS, so a synchronous require does.
 */
function nodePty(): typeof NodePty {
  loadedPty ??= createRequire(import.meta.url)('node-pty') as typeof NodePty;
  return loadedPty;
}

export interface PtySpawnOptions {
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

/** Spawns a process on a fresh pseudo-terminal; stdout and stderr arrive merged as `pty` output. */
export function spawnPtyProcess(plan: LaunchPlan, opts: PtySpawnOptions): ProcessIo {
  const term = nodePty().spawn(plan.file, plan.args, {
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
  private paused = false;

  /**
   * envd's own descriptor of the terminal's slave side. Without it the master reads EIO as soon
   * as the last process closes the slave, and output still queued in the line discipline is
   * lost; with it, output is drained first and the descriptor is closed after the exit.
   */
  private slaveFd: number | undefined;

  constructor(private readonly term: NodePty.IPty) {
    this.pid = term.pid;
    const ptsName = (term as NodePty.IPty & { ptsName?: string }).ptsName;
    try {
      this.slaveFd = ptsName ? openSync(ptsName, fsConstants.O_RDWR | fsConstants.O_NOCTTY) : undefined;
    } catch {
      this.slaveFd = undefined;
    }
  }

  private releaseSlave(): void {
    if (this.slaveFd === undefined) return;
    try {
      closeSync(this.slaveFd);
    } catch {
      // already gone
    }
    this.slaveFd = undefined;
  }

  attach(sink: { data(kind: OutputKind, data: Uint8Array): void; exit(info: ExitInfo): void }): void {
    // node-pty may still deliver output after its exit event (it only waits a bounded time for
    // the terminal to drain), so the exit is reported once output has been quiet for a moment.
    let pendingExit: ExitInfo | undefined;
    let quietTimer: NodeJS.Timeout | undefined;
    let chunks = 0;
    const armQuietTimer = (): void => {
      clearTimeout(quietTimer);
      quietTimer = setTimeout(() => {
        if (this.paused) return armQuietTimer();
        // Output already waiting when the (wall-time) deadline passes is read first, as for pipes (pipe-process.ts).
        const seen = chunks;
        setImmediate(() => {
          if (chunks !== seen) return;
          const info = pendingExit;
          pendingExit = undefined;
          this.releaseSlave();
          if (info) sink.exit(info);
        });
      }, EXIT_QUIET_MS);
    };
    // With `encoding: null` node-pty hands out Buffers, typed as string.
    this.term.onData((data: string | Buffer) => {
      chunks++;
      sink.data('pty', typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
      if (pendingExit) armQuietTimer();
    });
    this.term.onExit(({ exitCode, signal }) => {
      this.exited = true;
      pendingExit = exitInfo(exitCode, signal ? signal : null);
      armQuietTimer();
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
    try {
      process.kill(this.pid, signal);
    } catch (error) {
      // Exited already, its exit event not yet seen: nothing left to signal.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }

  pause(): void {
    this.paused = true;
    this.term.pause();
  }

  resume(): void {
    this.paused = false;
    this.term.resume();
  }
}
