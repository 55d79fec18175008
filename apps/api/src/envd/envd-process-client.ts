/**
 * Runs processes in a container's envd over Connect (the `process.Process` service): foreground
 * commands with streamed output and an exit code, and background processes (a template's start
 * command) that keep running after the call returns.
 */
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Process, Signal, type StartResponse } from '@tidepool/protocol/process';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { dialledRequestOptions, type EnvdDial, envdUrl } from './envd-client.ts';

export interface EnvdCommand {
  /** Executable, e.g. `/bin/bash`. */
  cmd: string;
  args: string[];
  /** Runs as this user (Basic auth); envd's default user when absent. */
  user?: string;
  /** Working directory; envd's default (the user's home or the template's workdir) when absent. */
  cwd?: string;
  /** Added on top of envd's environment (PATH, HOME, USER, LOGNAME, the sandbox's envVars). */
  envs?: Record<string, string>;
  /** Label shown by `commands.list()` (e.g. `startCmd`). */
  tag?: string;
  /** Lifetime of the process: envd kills it after this long. Absent or 0 = no limit. */
  timeoutMs?: number;
}

/** Receives output as it arrives, decoded as UTF-8 (a multi-byte character is never split). */
export interface OutputSink {
  stdout?(text: string): void;
  stderr?(text: string): void;
}

export interface CommandResult {
  pid: number;
  /** -1 when the process died from a signal. */
  exitCode: number;
  /** e.g. `exit status 1`, `signal: killed`. */
  status: string;
}

export interface BackgroundProcess {
  pid: number;
  /**
   * Settles when the process ends (with its result) or when the output stream is detached or
   * lost (undefined: the process may still be running). Never rejects.
   */
  ended: Promise<CommandResult | undefined>;
  /** Stops following the output; the process keeps running inside envd. */
  detach(): void;
}

export class EnvdCommandError extends Error {
  constructor(
    message: string,
    readonly code?: Code,
  ) {
    super(message);
  }
}

export interface EnvdProcessClientOptions {
  /** Sent as `X-Access-Token` when the sandbox has one. */
  accessToken?: string;
  /** Overrides `http://<address>:49983` (e.g. a published port in tests). */
  baseUrl?: string;
  /** Connect's JSON codec instead of binary (what the e2b SDK speaks). */
  json?: boolean;
  /** Streams through the sandbox's node (a node on another machine); none: direct connections. */
  dial?: EnvdDial;
}

const KEEPALIVE_SECONDS = 30;

/** Largest single Connect message accepted from envd; larger ones fail with ResourceExhausted. */
export const MAX_ENVD_MESSAGE_BYTES = 4 * 1024 * 1024;

function basicAuth(user: string): string {
  return `Basic ${Buffer.from(`${user}:`).toString('base64')}`;
}

function describe(error: unknown): string {
  if (error instanceof ConnectError) return `${Code[error.code] ?? error.code}: ${error.rawMessage}`;
  return error instanceof Error ? error.message : String(error);
}

/** Turns one process's event stream into sink calls; returns the end event, if it came. */
class EventReader {
  private readonly stdoutDecoder = new TextDecoder();
  private readonly stderrDecoder = new TextDecoder();
  pid: number | undefined;

  constructor(private readonly sink: OutputSink | undefined) {}

  /** Handles one response; returns the result when it was the end event. */
  accept(response: StartResponse): CommandResult | undefined {
    const event = response.event?.event;
    if (!event) return undefined;
    switch (event.case) {
      case 'start':
        this.pid = event.value.pid;
        return undefined;
      case 'data': {
        const output = event.value.output;
        if (output.case === 'stdout') this.emit('stdout', this.stdoutDecoder.decode(output.value, { stream: true }));
        else if (output.case === 'stderr' || output.case === 'pty') this.emit('stderr', this.stderrDecoder.decode(output.value, { stream: true }));
        return undefined;
      }
      case 'end':
        this.flush();
        return { pid: this.pid ?? 0, exitCode: event.value.exitCode, status: event.value.status };
      default:
        return undefined;
    }
  }

  flush(): void {
    this.emit('stdout', this.stdoutDecoder.decode());
    this.emit('stderr', this.stderrDecoder.decode());
  }

  private emit(stream: 'stdout' | 'stderr', text: string): void {
    if (text) this.sink?.[stream]?.(text);
  }
}

/** One envd, reached at a container address (port 49983). */
export class EnvdProcessClient {
  private readonly client: Client<typeof Process>;
  private readonly accessToken: string | undefined;

  constructor(address: string, options: EnvdProcessClientOptions = {}) {
    this.accessToken = options.accessToken;
    const transport = createConnectTransport({
      baseUrl: options.baseUrl ?? envdUrl(address, ''),
      httpVersion: '1.1',
      useBinaryFormat: !options.json,
      acceptCompression: [],
      // One message of the sandbox's answer (process output comes in small chunks) is never buffered beyond this.
      readMaxBytes: MAX_ENVD_MESSAGE_BYTES,
      ...(options.dial ? { nodeOptions: dialledRequestOptions(options.dial, address, ENVD_PORT) } : {}),
    });
    this.client = createClient(Process, transport);
  }

  private headers(user: string | undefined): Record<string, string> {
    const headers: Record<string, string> = { 'keepalive-ping-interval': String(KEEPALIVE_SECONDS) };
    if (user) headers.authorization = basicAuth(user);
    if (this.accessToken) headers['x-access-token'] = this.accessToken;
    return headers;
  }

  private open(command: EnvdCommand, signal: AbortSignal): AsyncIterable<StartResponse> {
    return this.client.start(
      {
        process: { cmd: command.cmd, args: command.args, envs: command.envs ?? {}, cwd: command.cwd },
        tag: command.tag,
        stdin: false,
      },
      { headers: this.headers(command.user), signal, timeoutMs: command.timeoutMs || undefined },
    );
  }

  /**
   * Runs a command to completion. Aborting `signal` kills the process (SIGKILL) and rejects.
   * Rejects with EnvdCommandError when envd refuses the command (unknown user, missing cwd, …).
   */
  async run(command: EnvdCommand, sink?: OutputSink, signal?: AbortSignal): Promise<CommandResult> {
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();
    const reader = new EventReader(sink);
    try {
      for await (const response of this.open(command, controller.signal)) {
        const result = reader.accept(response);
        if (result) return result;
      }
      reader.flush();
      throw new EnvdCommandError(`'${command.cmd}' ended without an exit status`);
    } catch (error) {
      if (controller.signal.aborted) {
        if (reader.pid !== undefined) await this.kill(reader.pid).catch(() => undefined);
        throw signal?.reason instanceof Error ? signal.reason : new EnvdCommandError('aborted', Code.Canceled);
      }
      if (error instanceof EnvdCommandError) throw error;
      throw new EnvdCommandError(`envd could not run '${command.cmd}': ${describe(error)}`, error instanceof ConnectError ? error.code : undefined);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * Starts a process that outlives the call (no lifetime limit unless `timeoutMs`). Resolves once
   * envd reports its pid; output keeps flowing into `sink` until the process ends or `detach()`.
   */
  async start(command: EnvdCommand, sink?: OutputSink): Promise<BackgroundProcess> {
    const controller = new AbortController();
    const reader = new EventReader(sink);
    const iterator = this.open(command, controller.signal)[Symbol.asyncIterator]();
    try {
      // The first event is `start` with the pid.
      for (;;) {
        const next = await iterator.next();
        if (next.done) throw new EnvdCommandError(`'${command.cmd}' ended before it started`);
        const result = reader.accept(next.value);
        if (reader.pid !== undefined) {
          const ended = result ? Promise.resolve(result) : this.follow(iterator, reader);
          return { pid: reader.pid, ended, detach: () => controller.abort() };
        }
      }
    } catch (error) {
      controller.abort();
      if (error instanceof EnvdCommandError) throw error;
      throw new EnvdCommandError(`envd could not start '${command.cmd}': ${describe(error)}`, error instanceof ConnectError ? error.code : undefined);
    }
  }

  private async follow(iterator: AsyncIterator<StartResponse>, reader: EventReader): Promise<CommandResult | undefined> {
    try {
      for (;;) {
        const next = await iterator.next();
        if (next.done) break;
        const result = reader.accept(next.value);
        if (result) return result;
      }
    } catch {
      // detached, or the connection to envd was lost
    }
    reader.flush();
    return undefined;
  }

  /** Sends SIGKILL to a process; false when envd no longer knows the pid. */
  async kill(pid: number): Promise<boolean> {
    try {
      await this.client.sendSignal(
        { process: { selector: { case: 'pid', value: pid } }, signal: Signal.SIGKILL },
        { headers: this.headers(undefined), timeoutMs: 5_000 },
      );
      return true;
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.NotFound) return false;
      throw new EnvdCommandError(`envd could not kill pid ${pid}: ${describe(error)}`, error instanceof ConnectError ? error.code : undefined);
    }
  }
}

/** `/bin/bash -c <script>` (or another shell) as an EnvdCommand. */
export function shellCommand(script: string, options: Omit<EnvdCommand, 'cmd' | 'args'> & { shell?: string } = {}): EnvdCommand {
  const { shell, ...rest } = options;
  return { cmd: shell ?? '/bin/bash', args: ['-c', script], ...rest };
}
