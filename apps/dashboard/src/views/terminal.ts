import { Code, ConnectError } from '@connectrpc/connect';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import type { ConnectResponse, StartResponse } from '@tidepool/protocol/process';
import { h } from '../dom.ts';
import { type EnvdClients, type EnvdTarget, envdClients, userHeader } from '../envd.ts';

/** The PTY's pid per sandbox, so a reload re-attaches to the same shell (this tab only). */
const pidKey = (sandboxId: string): string => `tidepool.pty.${sandboxId}`;

type StreamMessage = StartResponse | ConnectResponse;

/**
 * A live shell in the sandbox: xterm.js on top of envd's PTY, reached over Connect through the platform
 * proxy. Keys go out with SendInput (in order, one request at a time), the size follows the element with
 * Update, and the pid is remembered so the next page load attaches with Connect instead of starting anew.
 */
export class TerminalSession {
  readonly element: HTMLElement;
  private readonly status: HTMLElement;
  private readonly term: Terminal;
  private readonly fit = new FitAddon();
  private readonly clients: EnvdClients;
  private readonly encoder = new TextEncoder();
  private readonly abort = new AbortController();
  private readonly resizeObserver: ResizeObserver;
  private pid: number | undefined;
  private pending: Uint8Array[] = [];
  private sending = false;
  private disposed = false;
  private resizeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly target: EnvdTarget) {
    this.clients = envdClients(target);
    this.status = h('p', { class: 'terminal-status', role: 'status' }, 'Connecting…');
    const screen = h('div', { class: 'terminal-screen', 'aria-label': 'Terminal' });
    const restart = h('button', { type: 'button', onclick: () => void this.restart() }, 'New shell');
    this.element = h(
      'section',
      { class: 'terminal' },
      h('div', { class: 'terminal-bar' }, this.status, h('span', { class: 'terminal-keys' }, 'Keys go to the shell; F6 leaves the terminal.'), restart),
      screen,
    );
    this.term = new Terminal({
      cursorBlink: true,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, monospace',
      fontSize: 14,
      scrollback: 5000,
      theme: { background: '#0f1720', foreground: '#d8dee9' },
    });
    this.term.loadAddon(this.fit);
    // Tab belongs to the shell (completion); F6 moves the keyboard focus out of the terminal instead.
    this.term.attachCustomKeyEventHandler((event) => {
      if (event.key !== 'F6') return true;
      if (event.type === 'keydown') restart.focus();
      return false;
    });
    this.term.onData((data) => this.send(this.encoder.encode(data)));
    this.term.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ cols, rows }) => void this.updateSize(cols, rows));
    this.resizeObserver = new ResizeObserver(() => {
      clearTimeout(this.resizeTimer);
      this.resizeTimer = setTimeout(() => this.refit(), 80);
    });
    // Opened once the element is in the document (xterm measures its cells there).
    queueMicrotask(() => {
      this.term.open(screen);
      this.refit();
      this.resizeObserver.observe(screen);
      this.term.focus();
      void this.run();
    });
  }

  dispose(): void {
    this.disposed = true;
    this.abort.abort();
    this.resizeObserver.disconnect();
    clearTimeout(this.resizeTimer);
    this.term.dispose();
  }

  private refit(): void {
    if (this.disposed) return;
    try {
      this.fit.fit();
    } catch {
      // not laid out yet
    }
  }

  private setStatus(text: string): void {
    this.status.textContent = text;
  }

  /** Attach to the remembered shell when it still runs, otherwise start one. */
  private async run(): Promise<void> {
    const remembered = Number(sessionStorage.getItem(pidKey(this.target.sandboxID)));
    if (Number.isInteger(remembered) && remembered > 0) {
      const attached = await this.follow(
        this.clients.process.connect({ process: { selector: { case: 'pid', value: remembered } } }, { signal: this.abort.signal, headers: { 'Keepalive-Ping-Interval': '30' } }),
        remembered,
      );
      if (attached || this.disposed) return;
      sessionStorage.removeItem(pidKey(this.target.sandboxID));
    }
    await this.start();
  }

  private async start(): Promise<void> {
    this.pid = undefined;
    this.setStatus('Starting a shell…');
    const stream = this.clients.process.start(
      {
        process: { cmd: '/bin/bash', args: ['-i', '-l'], envs: { TERM: 'xterm-256color', LANG: 'C.UTF-8', COLORTERM: 'truecolor' } },
        pty: { size: { cols: this.term.cols, rows: this.term.rows } },
        tag: 'dashboard-terminal',
      },
      { signal: this.abort.signal, headers: { ...userHeader(), 'Keepalive-Ping-Interval': '30' } },
    );
    await this.follow(stream, undefined);
  }

  /** Ends the current shell (SIGKILL) and starts a fresh one. */
  private async restart(): Promise<void> {
    const old = this.pid;
    if (old !== undefined) {
      await this.clients.process.sendSignal({ process: { selector: { case: 'pid', value: old } }, signal: 9 }).catch(() => undefined);
    }
    sessionStorage.removeItem(pidKey(this.target.sandboxID));
    this.term.reset();
    await this.start();
  }

  /**
   * Reads a Start or Connect stream into the terminal. Answers false when the stream failed before anything
   * came (e.g. the remembered process is gone), true once it was attached.
   */
  private async follow(stream: AsyncIterable<StreamMessage>, attachTo: number | undefined): Promise<boolean> {
    let attached = false;
    let streamPid: number | undefined;
    const attach = (pid: number): void => {
      if (attached) return;
      attached = true;
      streamPid = pid;
      this.pid = pid;
      sessionStorage.setItem(pidKey(this.target.sandboxID), String(pid));
      this.setStatus(attachTo === undefined ? `Shell started (pid ${pid})` : `Re-attached to the shell (pid ${pid})`);
      // The window may have changed since the PTY was sized: tell it (and the shell redraws on SIGWINCH).
      void this.updateSize(this.term.cols, this.term.rows);
      void this.flush();
    };
    try {
      for await (const message of stream) {
        const event = message.event?.event;
        if (!event) continue;
        if (event.case === 'start') attach(event.value.pid);
        else if (attachTo !== undefined && !attached) attach(attachTo);
        if (event.case === 'data' && event.value.output.case === 'pty') this.term.write(event.value.output.value);
        if (event.case === 'end' && streamPid !== undefined && this.pid === streamPid) {
          if (sessionStorage.getItem(pidKey(this.target.sandboxID)) === String(streamPid)) sessionStorage.removeItem(pidKey(this.target.sandboxID));
          this.pid = undefined;
          this.setStatus(`The shell ended (${event.value.status || `exit code ${event.value.exitCode}`}): "New shell" starts another.`);
          this.term.write('\r\n\x1b[2m[process ended]\x1b[0m\r\n');
        }
      }
      if (attachTo !== undefined && !attached) return false;
      if (this.pid !== undefined && this.pid === streamPid && !this.disposed) this.setStatus('Disconnected from the shell: reload the page to re-attach.');
      return true;
    } catch (err) {
      if (this.disposed) return true;
      if (!attached) {
        if (attachTo !== undefined) return false;
        this.setStatus(`Could not start a shell: ${describe(err)}`);
        return true;
      }
      if (this.pid === streamPid) this.setStatus(`Disconnected from the shell (${describe(err)}): reload the page to re-attach.`);
      return true;
    }
  }

  private send(data: Uint8Array): void {
    this.pending.push(data);
    void this.flush();
  }

  /** One SendInput at a time, so keystrokes arrive in the order they were typed. */
  private async flush(): Promise<void> {
    if (this.sending || this.pid === undefined) return;
    this.sending = true;
    try {
      while (this.pending.length > 0 && this.pid !== undefined) {
        const chunks = this.pending.splice(0);
        const total = chunks.reduce((n, c) => n + c.length, 0);
        const input = new Uint8Array(total);
        let at = 0;
        for (const c of chunks) {
          input.set(c, at);
          at += c.length;
        }
        await this.clients.process.sendInput({ process: { selector: { case: 'pid', value: this.pid } }, input: { input: { case: 'pty', value: input } } });
      }
    } catch (err) {
      if (!this.disposed) this.setStatus(`Input was not delivered: ${describe(err)}`);
    } finally {
      this.sending = false;
    }
  }

  private async updateSize(cols: number, rows: number): Promise<void> {
    if (this.pid === undefined) return;
    try {
      await this.clients.process.update({ process: { selector: { case: 'pid', value: this.pid } }, pty: { size: { cols, rows } } });
    } catch (err) {
      if (!this.disposed) this.setStatus(`Resize failed: ${describe(err)}`);
    }
  }
}

function describe(err: unknown): string {
  if (err instanceof ConnectError) return err.code === Code.NotFound ? 'no such process' : err.rawMessage || Code[err.code];
  return err instanceof Error ? err.message : String(err);
}
