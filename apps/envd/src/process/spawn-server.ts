import { spawn, type ChildProcess } from 'node:child_process';
import { constants as fsConstants, openSync, closeSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../logger.ts';

/** A started process as the pipe path sees it (a `ChildProcess` or a child of the spawn server). */
export interface PipeChild {
  readonly pid: number;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** Called once with Node's (code, signal) convention: code null when a signal ended it. */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | number | null) => void): void;
  kill(signal: NodeJS.Signals): void;
}

export interface ServedSpawn {
  uid: number;
  gid: number;
  /** Supplementary groups, the primary gid included. */
  groups: number[];
  cwd: string;
  env: Record<string, string>;
  /** argv[0] is the file, looked up on the request's PATH. */
  argv: string[];
  stdin: boolean;
}

/** A spawn the server refused before exec (bad cwd, pipe/fork failure, user switch). */
export class ServedSpawnError extends Error {
  constructor(readonly errno: number, readonly stage: string) {
    super(`${stage}: ${errnoName(errno)}`);
  }
}

const ERRNO_NAMES = new Map<number, string>(Object.entries(osConstants.errno).map(([name, num]) => [num, name]));

function errnoName(errno: number): string {
  return ERRNO_NAMES.get(errno) ?? `errno ${errno}`;
}

type ExitListener = (code: number | null, signal: NodeJS.Signals | number | null) => void;

interface Pending {
  resolve(child: PipeChild): void;
  reject(error: Error): void;
  stdin: boolean;
}

class ServedChild implements PipeChild {
  private exitListener: ExitListener | undefined;
  private exited: { code: number | null; signal: number | null } | undefined;

  constructor(
    private readonly server: SpawnServer,
    private readonly id: number,
    readonly pid: number,
    readonly stdin: Writable | null,
    readonly stdout: Readable,
    readonly stderr: Readable,
  ) {}

  onExit(listener: ExitListener): void {
    this.exitListener = listener;
    if (this.exited) listener(this.exited.code, this.exited.signal);
  }

  kill(signal: NodeJS.Signals): void {
    if (this.exited) return;
    const signo = osConstants.signals[signal];
    if (signo !== undefined) this.server.send('K', [String(this.id), String(signo)]);
  }

  /** `status` is the raw waitpid status; null when the server went away without reporting one. */
  ended(status: number | null): void {
    if (this.exited) return;
    if (status === null) this.exited = { code: null, signal: null };
    else if ((status & 0x7f) === 0) this.exited = { code: (status >> 8) & 0xff, signal: null };
    else this.exited = { code: null, signal: status & 0x7f };
    this.exitListener?.(this.exited.code, this.exited.signal);
  }
}

/**
 * Client of `exec-as-user --serve`: starts processes as any user from a small helper process
 * instead of forking envd (whose fork, page-table copy and exec wait cost milliseconds and
 * block the event loop). The pipes are created by the server; envd opens its own ends through
 * /proc/<server>/fd/<n> (envd runs as root, like the server) and then lets the server close its
 * copies, so EOF and EPIPE behave exactly as with pipes envd created itself.
 */
export class SpawnServer {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private readonly live = new Map<number, ServedChild>();
  private nextId = 1;
  private lineBuffer = '';
  private dead = false;

  constructor(helperPath: string, private readonly logger: Logger) {
    this.child = spawn(helperPath, ['--serve'], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.child.on('error', (error) => this.fail(error));
    this.child.once('exit', (code, signal) => this.fail(new Error(`spawn server exited (${signal ?? `code ${code}`})`)));
    this.child.stdin!.on('error', () => {});
    this.child.stdout!.setEncoding('latin1');
    this.child.stdout!.on('data', (text: string) => this.onData(text));
    // Only envd's own work (its server, running commands) keeps it alive, not an idle helper.
    this.child.unref();
    (this.child.stdin as Socket).unref();
    (this.child.stdout as Socket).unref();
  }

  get alive(): boolean {
    return !this.dead;
  }

  spawn(request: ServedSpawn): Promise<PipeChild> {
    if (this.dead) return Promise.reject(new Error('spawn server is not running'));
    const id = this.nextId++;
    const envList = Object.entries(request.env).map(([k, v]) => `${k}=${v}`);
    const fields = [
      String(id),
      String(request.uid),
      String(request.gid),
      request.groups.length > 0 ? request.groups.join(',') : '-',
      request.stdin ? 'p' : 'n',
      request.cwd,
      String(request.argv.length),
      ...request.argv,
      String(envList.length),
      ...envList,
    ];
    for (const field of fields) {
      if (field.includes('\0')) return Promise.reject(new Error('arguments, environment and cwd must not contain NUL bytes'));
    }
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, stdin: request.stdin });
      this.send('S', fields);
    });
  }

  /** Ends the server (it also ends on its own when envd's end of its stdin closes). */
  stop(): void {
    this.child.stdin?.end();
  }

  send(kind: 'S' | 'C' | 'K', fields: string[]): void {
    if (this.dead) return;
    const payload = Buffer.from(`${kind}${fields.join('\0')}\0`, 'utf8');
    const header = Buffer.allocUnsafe(4);
    header.writeUInt32LE(payload.length, 0);
    this.child.stdin!.write(Buffer.concat([header, payload]));
  }

  private onData(text: string): void {
    this.lineBuffer += text;
    let newline: number;
    while ((newline = this.lineBuffer.indexOf('\n')) >= 0) {
      const line = this.lineBuffer.slice(0, newline);
      this.lineBuffer = this.lineBuffer.slice(newline + 1);
      this.onLine(line);
    }
  }

  private onLine(line: string): void {
    const parts = line.split(' ');
    const id = Number(parts[1]);
    if (parts[0] === 'P') {
      const pending = this.pending.get(id);
      if (!pending) return;
      this.pending.delete(id);
      try {
        pending.resolve(this.adopt(id, Number(parts[2]), Number(parts[3]), Number(parts[4]), Number(parts[5])));
      } catch (error) {
        // The process runs but envd cannot reach its pipes: stop it and report the start as failed.
        this.send('K', [String(id), String(osConstants.signals.SIGKILL)]);
        this.send('C', [String(id)]);
        pending.reject(error instanceof Error ? error : new Error(String(error)));
      }
    } else if (parts[0] === 'F') {
      const pending = this.pending.get(id);
      if (!pending) return;
      this.pending.delete(id);
      pending.reject(new ServedSpawnError(Number(parts[2]), parts.slice(3).join(' ') || 'spawn'));
    } else if (parts[0] === 'X') {
      const child = this.live.get(id);
      if (!child) return;
      this.live.delete(id);
      child.ended(Number(parts[2]));
    } else if (line !== '') {
      this.logger.warn({ line }, 'spawn server: unexpected reply');
    }
  }

  private adopt(id: number, pid: number, stdinFd: number, stdoutFd: number, stderrFd: number): ServedChild {
    const base = `/proc/${this.child.pid}/fd/`;
    const opened: number[] = [];
    try {
      const open = (fd: number, flags: number): number => {
        const own = openSync(base + fd, flags | fsConstants.O_NONBLOCK);
        opened.push(own);
        return own;
      };
      const inFd = stdinFd >= 0 ? open(stdinFd, fsConstants.O_WRONLY) : -1;
      const outFd = open(stdoutFd, fsConstants.O_RDONLY);
      const errFd = open(stderrFd, fsConstants.O_RDONLY);
      this.send('C', [String(id)]);
      const stdin = inFd >= 0 ? new Socket({ fd: inFd, readable: false, writable: true }) : null;
      const stdout = new Socket({ fd: outFd, readable: true, writable: false });
      const stderr = new Socket({ fd: errFd, readable: true, writable: false });
      const child = new ServedChild(this, id, pid, stdin, stdout, stderr);
      this.live.set(id, child);
      return child;
    } catch (error) {
      for (const fd of opened) closeSync(fd);
      throw error;
    }
  }

  private fail(error: Error): void {
    if (this.dead) return;
    this.dead = true;
    if (this.pending.size > 0 || this.live.size > 0) {
      this.logger.error({ err: error, pending: this.pending.size, running: this.live.size }, 'spawn server failed; its running processes are reported as ended');
    }
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
    for (const child of this.live.values()) child.ended(null);
    this.live.clear();
  }
}

const servers = new Map<string, SpawnServer>();

/** The spawn server of a helper binary, started on first use and again after it died. */
export function spawnServerFor(helperPath: string, logger: Logger): SpawnServer {
  let server = servers.get(helperPath);
  if (!server?.alive) {
    server = new SpawnServer(helperPath, logger);
    servers.set(helperPath, server);
  }
  return server;
}
