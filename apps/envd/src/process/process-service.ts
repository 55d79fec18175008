import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { Process, Signal, type StartRequest, type StreamInputRequest } from '@tidepool/protocol/process';
import type { EnvdContext } from '../context.ts';
import { resolveRpcUser } from '../identity/request-user.ts';
import { replayExit, type ProcessEventInit, ProcessSubscription } from './event-stream.ts';
import { keepaliveIntervalMs } from '../connect/keepalive.ts';
import type { ProcessHandle } from './process-handle.ts';
import { writeProcessInput } from './process-input.ts';
import { describeSelector, ProcessRegistry } from './process-registry.ts';
import { spawnProcess } from './process-spawner.ts';

function toNodeSignal(signal: Signal): NodeJS.Signals {
  switch (signal) {
    case Signal.SIGTERM:
      return 'SIGTERM';
    case Signal.SIGKILL:
      return 'SIGKILL';
    default:
      throw new ConnectError(`invalid signal: ${signal}`, Code.Unimplemented);
  }
}

/** `Connect-Timeout-Ms` on `Start` is the lifetime of the process: SIGKILL when it runs out. */
function enforceLifetime(envd: EnvdContext, handle: ProcessHandle, timeoutMs: number | undefined): void {
  if (timeoutMs === undefined) return;
  const timer = setTimeout(() => {
    envd.logger.info({ pid: handle.pid }, 'process lifetime (Connect-Timeout-Ms) exceeded, killing it');
    handle.signal('SIGKILL');
  }, Math.max(0, timeoutMs));
  void handle.ended.then(() => clearTimeout(timer));
}

async function* asResponses(events: AsyncIterable<ProcessEventInit>): AsyncGenerator<{ event: ProcessEventInit }> {
  for await (const event of events) yield { event };
}

/** What a `Start` call is made of, whichever transport carried it (Connect's handler or start-fast-path.ts). */
export interface StartCall {
  request: StartRequest;
  /** The `Authorization` header (Basic user), if any. */
  authorization: string | null | undefined;
  /** Aborted when the client goes away (plain abort) or the deadline passes (ConnectError deadline_exceeded). */
  signal: AbortSignal;
  /** `Connect-Timeout-Ms`: the process's lifetime. */
  timeoutMs: number | undefined;
  keepaliveMs: number;
}

/** `Start`: spawns the process as the call's user and streams its events (start, data, keepalives, end). */
export async function* startProcessEvents(envd: EnvdContext, registry: ProcessRegistry, call: StartCall): AsyncGenerator<ProcessEventInit> {
  const user = resolveRpcUser(envd.users, envd.state, call.authorization);
  const handle = await spawnProcess(envd, call.request, user);
  registry.add(handle);
  const subscription = new ProcessSubscription(handle);
  handle.release();
  enforceLifetime(envd, handle, call.timeoutMs);
  yield* subscription.events(call.signal, call.keepaliveMs);
}

/** Implements `process.Process`: start, attach to, feed, signal and list processes. */
export function registerProcessService(router: ConnectRouter, envd: EnvdContext): ProcessRegistry {
  const registry = new ProcessRegistry();

  const streamOf = (subscription: ProcessSubscription, ctx: HandlerContext) =>
    asResponses(subscription.events(ctx.signal, keepaliveIntervalMs(ctx.requestHeader)));

  router.service(Process, {
    async *start(request, ctx) {
      const call: StartCall = {
        request,
        authorization: ctx.requestHeader.get('authorization'),
        signal: ctx.signal,
        timeoutMs: ctx.timeoutMs(),
        keepaliveMs: keepaliveIntervalMs(ctx.requestHeader),
      };
      yield* asResponses(startProcessEvents(envd, registry, call));
    },

    async *connect(request, ctx) {
      const found = registry.lookup(request.process);
      if (!found) {
        if (!request.process?.selector.case) throw new ConnectError('process selector is required', Code.InvalidArgument);
        throw new ConnectError(`${describeSelector(request.process)} not found`, Code.NotFound);
      }
      if ('exited' in found) {
        yield* asResponses(replayExit(found.exited.pid, found.exited.exit));
        return;
      }
      const exit = found.live.exit;
      if (exit) {
        yield* asResponses(replayExit(found.live.pid, exit));
        return;
      }
      yield* streamOf(new ProcessSubscription(found.live), ctx);
    },

    list() {
      return {
        processes: registry.list().map((handle) => ({ pid: handle.pid, tag: handle.tag, config: handle.config })),
      };
    },

    async sendInput(request) {
      await writeProcessInput(registry.requireLive(request.process), request.input);
      return {};
    },

    async streamInput(requests: AsyncIterable<StreamInputRequest>) {
      let handle: ProcessHandle | undefined;
      for await (const message of requests) {
        const event = message.event;
        if (event.case === 'start') {
          handle = registry.requireLive(event.value.process);
        } else if (event.case === 'data') {
          if (!handle) throw new ConnectError('stream input must begin with a start event', Code.FailedPrecondition);
          await writeProcessInput(handle, event.value.input);
        }
      }
      return {};
    },

    sendSignal(request) {
      const handle = registry.requireLive(request.process);
      handle.signal(toNodeSignal(request.signal));
      return {};
    },

    closeStdin(request) {
      const handle = registry.requireLive(request.process);
      if (handle.isPty) {
        throw new ConnectError('cannot close stdin of a PTY process; send Ctrl-D (0x04) as pty input instead', Code.FailedPrecondition);
      }
      handle.closeStdin();
      return {};
    },

    update(request) {
      const handle = registry.requireLive(request.process);
      if (!handle.isPty) throw new ConnectError('tty not assigned to process', Code.Internal);
      const size = request.pty?.size;
      if (size) handle.resize(size.cols, size.rows);
      return {};
    },
  });
  return registry;
}
