import { Code, ConnectError } from '@connectrpc/connect';
import { type ConnectResponse, Signal, type StartResponse } from '@tidepool/protocol/process';
import { platform } from '../api.ts';
import { describeStreamEnd, PASSWORD_FILE, READY_LINE, STREAM_SCRIPT, STREAM_TAG, streamPassword, streamUrl } from '../desktop.ts';
import { fill, h } from '../dom.ts';
import { downloadFile, type EnvdClients, type EnvdTarget, envdClients, userHeader } from '../envd.ts';

type StreamMessage = StartResponse | ConnectResponse;

/** How long Stop waits for the stream to end on SIGTERM before it sends SIGKILL. */
const STOP_GRACE_MS = 5000;
/** How long Stop waits for x11vnc and noVNC to be gone from the process table afterwards. */
const GONE_TIMEOUT_MS = 10_000;

/**
 * A shell check: exit 0 when nothing of the dashboard's stream runs (its x11vnc, anything on noVNC's port). The
 * bracket keeps pgrep from finding this check's own shell, whose command line holds the pattern.
 */
const STREAM_GONE_CHECK = `! pgrep -f "[x]11vnc .*${PASSWORD_FILE}" >/dev/null && ! netstat -tln 2>/dev/null | grep -q "[:.]6080 "`;

/**
 * The live desktop of a `desktop` sandbox beside its terminal: "Show desktop" starts the stream (x11vnc on the
 * display, noVNC on 6080, password-protected; see desktop.ts) as one envd process tagged STREAM_TAG and shows noVNC's
 * page from the sandbox's own host in a frame; "Stop desktop" ends that process, which takes x11vnc and noVNC with
 * it, and waits until they are gone. A stream this dashboard started earlier (another tab, before a reload) is
 * found by its tag and shown again. Why a start failed (no display, a dead Xvfb, a stream of the SDK's) is said in
 * the status line; Show desktop again retries.
 */
export class DesktopView {
  readonly element: HTMLElement;
  private readonly status: HTMLElement;
  private readonly screen: HTMLElement;
  private readonly showButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly clients: EnvdClients;
  private readonly abort = new AbortController();
  private running = false;
  private stopping = false;
  private disposed = false;

  constructor(private readonly target: EnvdTarget & { trafficAccessToken?: string | null; domain?: string | null }) {
    this.clients = envdClients(target);
    this.status = h('p', { class: 'desktop-status', role: 'status', 'aria-live': 'polite' }, 'The desktop is not shown.');
    this.showButton = h('button', { type: 'button', class: 'desktop-show', onclick: () => void this.show() }, 'Show desktop');
    this.stopButton = h('button', { type: 'button', class: 'desktop-stop', disabled: true, onclick: () => void this.stop() }, 'Stop desktop');
    this.screen = h('div', { class: 'desktop-screen' });
    this.element = h('section', { class: 'desktop', 'aria-label': 'Desktop' }, h('div', { class: 'desktop-bar' }, this.status, this.showButton, this.stopButton), this.screen);
    void this.attachExisting();
  }

  dispose(): void {
    this.disposed = true;
    this.abort.abort();
  }

  private setStatus(text: string, kind: 'info' | 'error' = 'info'): void {
    this.status.textContent = text;
    this.status.classList.toggle('error', kind === 'error');
    this.status.setAttribute('role', kind === 'error' ? 'alert' : 'status');
  }

  private setRunning(running: boolean): void {
    this.running = running;
    this.showButton.disabled = running;
    this.stopButton.disabled = !running;
  }

  /** A browser frame cannot carry the traffic token a private sandbox's ports need. */
  private privateTraffic(): boolean {
    if (!this.target.trafficAccessToken) return false;
    this.setStatus('This sandbox\'s traffic is private (allowPublicTraffic: false): a browser frame cannot send its traffic token, so the desktop cannot be shown here.', 'error');
    this.showButton.disabled = true;
    return true;
  }

  /** Shows the stream this dashboard started before (found by its tag), if one runs. */
  private async attachExisting(): Promise<void> {
    if (this.privateTraffic()) return;
    try {
      const { processes } = await this.clients.process.list({}, { signal: this.abort.signal });
      if (!processes.some((p) => p.tag === STREAM_TAG) || this.disposed || this.running) return;
      this.setRunning(true);
      const password = (await (await downloadFile(this.target, PASSWORD_FILE)).text()).trim();
      await this.showFrame(password);
      this.setStatus('Showing the desktop stream started earlier (password-protected).');
      await this.follow(this.clients.process.connect({ process: { selector: { case: 'tag', value: STREAM_TAG } } }, { signal: this.abort.signal, headers: { 'Keepalive-Ping-Interval': '30' } }));
    } catch (err) {
      if (this.disposed) return;
      this.setRunning(false);
      fill(this.screen);
      this.setStatus(`Could not look for a running desktop stream: ${describe(err)}`, 'error');
    }
  }

  private async show(): Promise<void> {
    if (this.running || this.privateTraffic()) return;
    this.setRunning(true);
    this.stopButton.disabled = true;
    this.setStatus('Starting the desktop stream (x11vnc and noVNC)…');
    const password = streamPassword();
    const stream = this.clients.process.start(
      { process: { cmd: '/bin/bash', args: ['-c', STREAM_SCRIPT], envs: { TIDEPOOL_DESKTOP_PASSWORD: password } }, tag: STREAM_TAG },
      { signal: this.abort.signal, headers: { ...userHeader(), 'Keepalive-Ping-Interval': '30' } },
    );
    await this.follow(stream, password);
  }

  /** Reads the stream process's events: shows the frame when it says it is ready, and why it ended when it ends. */
  private async follow(stream: AsyncIterable<StreamMessage>, password?: string): Promise<void> {
    const decoder = new TextDecoder();
    let stdout = '';
    let stderr = '';
    let shown = password === undefined;
    try {
      for await (const message of stream) {
        const event = message.event?.event;
        if (!event) continue;
        if (event.case === 'start') this.stopButton.disabled = false;
        if (event.case === 'data' && event.value.output.case === 'stdout') {
          stdout += decoder.decode(event.value.output.value, { stream: true });
          if (!shown && stdout.includes(READY_LINE)) {
            shown = true;
            await this.showFrame(password!).then(
              () => this.setStatus('The desktop stream runs (x11vnc on the display, noVNC on port 6080, password-protected).'),
              (err: unknown) => this.setStatus(`The desktop stream runs, but its view could not be shown: ${describe(err)}. Stop desktop ends it.`, 'error'),
            );
          }
        }
        if (event.case === 'data' && event.value.output.case === 'stderr') stderr = (stderr + new TextDecoder().decode(event.value.output.value)).slice(-4000);
        if (event.case === 'end') {
          this.ended(describeStreamEnd(event.value.exitCode, stderr, event.value.status));
          return;
        }
      }
      if (!this.disposed && !this.stopping) this.setStatus('Lost the connection to the desktop stream\'s process: reload the page to show it again.', 'error');
    } catch (err) {
      if (this.disposed) return;
      if (this.stopping) return;
      this.ended(`The desktop stream could not be followed: ${describe(err)}`, true);
    }
  }

  /** The stream process ended: the frame goes, Show desktop works again (a retry). */
  private ended(message: string, failed = false): void {
    if (this.disposed) return;
    fill(this.screen);
    this.setRunning(false);
    if (this.stopping) return;
    this.setStatus(`${message} Show desktop tries again.`, failed || !/stopped/.test(message) ? 'error' : 'info');
  }

  private async showFrame(password: string): Promise<void> {
    const info = await platform();
    const src = streamUrl({
      sandboxID: this.target.sandboxID,
      sandboxDomain: info.sandboxDomain,
      publicDomain: info.publicDomain,
      page: { protocol: window.location.protocol, port: window.location.port },
      password,
    });
    fill(
      this.screen,
      h('iframe', {
        class: 'desktop-frame',
        src,
        title: `Desktop of sandbox ${this.target.sandboxID} (noVNC)`,
        referrerpolicy: 'no-referrer',
        // Its own origin (the sandbox's host); no navigating this page, no popups.
        sandbox: 'allow-scripts allow-same-origin allow-forms allow-pointer-lock',
        allow: 'clipboard-read; clipboard-write',
      }),
    );
  }

  /** SIGTERM to the stream process (SIGKILL if it lingers), then waits until x11vnc and noVNC are gone. */
  private async stop(): Promise<void> {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    this.stopButton.disabled = true;
    this.setStatus('Stopping the desktop stream…');
    fill(this.screen);
    const selector = { selector: { case: 'tag' as const, value: STREAM_TAG } };
    try {
      await this.clients.process.sendSignal({ process: selector, signal: Signal.SIGTERM });
      if (!(await this.until(() => this.exited(), STOP_GRACE_MS))) await this.clients.process.sendSignal({ process: selector, signal: Signal.SIGKILL }).catch(() => undefined);
      const gone = await this.until(() => this.check(STREAM_GONE_CHECK), GONE_TIMEOUT_MS);
      this.setStatus(gone ? 'The desktop stream was stopped: x11vnc and noVNC ended.' : 'The stream process ended, but x11vnc or noVNC still runs in the sandbox (pgrep x11vnc; port 6080).', gone ? 'info' : 'error');
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) this.setStatus('The desktop stream had already ended.');
      else this.setStatus(`Could not stop the desktop stream: ${describe(err)}`, 'error');
    } finally {
      this.stopping = false;
      this.setRunning(false);
    }
  }

  /** True once no process carries the stream's tag. */
  private async exited(): Promise<boolean> {
    const { processes } = await this.clients.process.list({});
    return !processes.some((p) => p.tag === STREAM_TAG);
  }

  /** Runs a short shell check as the sandbox user: true when it exits 0. */
  private async check(script: string): Promise<boolean> {
    const stream = this.clients.process.start({ process: { cmd: '/bin/bash', args: ['-c', script], envs: {} } }, { headers: userHeader() });
    for await (const message of stream) {
      const event = message.event?.event;
      if (event?.case === 'end') return event.value.exitCode === 0 && event.value.exited;
    }
    return false;
  }

  private async until(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.disposed) {
      if (await condition().catch(() => false)) return true;
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return false;
  }
}

function describe(err: unknown): string {
  if (err instanceof ConnectError) return err.rawMessage || Code[err.code];
  return err instanceof Error ? err.message : String(err);
}
