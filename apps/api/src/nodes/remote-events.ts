/**
 * The client of the agent's event stream (`POST /v1/runtime/watchEvents`, NDJSON): resolves once the agent says
 * it follows its engine, hands each checked event on, and settles `ended` with the reason the stream stopped. A
 * line that is not the protocol (or too long) ends the stream with a protocol error; the caller reconnects.
 */
import type { EngineEvent, EngineEventStream } from '../runtime/engine-events.ts';
import { decodeError } from './node-channel-errors.ts';
import type { NodeChannel } from './node-channel-client.ts';
import { EngineEventLine, schemaProblem } from './node-rpc-methods.ts';

const CONNECT_DEADLINE_MS = 30_000;
const MAX_LINE_BYTES = 64 * 1024;

export async function followRemoteEvents(channel: NodeChannel, since: number | undefined, onEvent: (event: EngineEvent) => void): Promise<EngineEventStream> {
  // The deadline covers only reaching the agent and its first line; the stream itself stays open.
  const call = channel.open('POST', '/v1/runtime/watchEvents', { args: [since ?? null] }, 2 ** 31 - 1, 'watchEvents');
  const connectTimer = setTimeout(() => call.abort(channel.fail('deadline', `watchEvents: not connected within ${CONNECT_DEADLINE_MS / 1000} s`)), CONNECT_DEADLINE_MS);
  let res;
  try {
    res = await call.response;
  } catch (error) {
    clearTimeout(connectTimer);
    throw error;
  }
  return new Promise<EngineEventStream>((resolve, reject) => {
    let connected = false;
    let closed = false;
    let buffer = '';
    let finish: (error: Error | undefined) => void = () => undefined;
    const ended = new Promise<Error | undefined>((settle) => {
      finish = (error) => {
        clearTimeout(connectTimer);
        if (!connected) reject(error ?? channel.fail('protocol', 'watchEvents: stream ended before it connected'));
        settle(closed ? undefined : error);
        finish = () => undefined;
      };
    });
    const stream: EngineEventStream = {
      ended,
      close() {
        closed = true;
        call.abort();
        finish(undefined);
      },
    };
    const broken = (message: string): void => {
      const error = channel.fail('protocol', `watchEvents: ${message}`);
      call.abort();
      finish(error);
    };
    const onLine = (line: string): boolean => {
      let value: unknown;
      try {
        value = JSON.parse(line) as unknown;
      } catch {
        broken(`a line that is not JSON (${JSON.stringify(line.slice(0, 80))})`);
        return false;
      }
      if (typeof value !== 'object' || value === null) {
        broken('a line that is not an object');
        return false;
      }
      const record = value as Record<string, unknown>;
      if (!connected) {
        if ('error' in record) {
          call.abort();
          finish(decodeError(record.error, channel.nodeId));
          return false;
        }
        if (record.connected !== true) {
          broken('the first line is not {"connected":true}');
          return false;
        }
        connected = true;
        clearTimeout(connectTimer);
        resolve(stream);
        return true;
      }
      if ('ended' in record) {
        const reason = record.ended as { message?: unknown } | null;
        finish(reason === null ? undefined : new Error(`node ${channel.nodeId}: engine event stream ended: ${typeof reason?.message === 'string' ? reason.message : 'unknown reason'}`));
        call.abort();
        return false;
      }
      const problem = schemaProblem(EngineEventLine, record.event);
      if (problem) {
        broken(`an event of the wrong shape (${problem})`);
        return false;
      }
      const event = record.event as { kind: 'died' | 'oom'; containerId: string; sandboxId: string; exitCode: number | null; time: number };
      onEvent({ kind: event.kind, containerId: event.containerId, sandboxId: event.sandboxId, exitCode: event.exitCode ?? undefined, time: event.time });
      return true;
    };
    if (res.statusCode !== 200) {
      // An error answer is one JSON object; read it whole (bounded) and decode it.
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_LINE_BYTES) broken(`HTTP ${res.statusCode} with an oversized body`);
      });
      res.once('end', () => {
        try {
          const value = JSON.parse(body) as { error?: unknown };
          finish(value && typeof value === 'object' && 'error' in value ? decodeError(value.error, channel.nodeId) : channel.fail('protocol', `watchEvents: HTTP ${res.statusCode}`));
        } catch {
          finish(channel.fail('protocol', `watchEvents: HTTP ${res.statusCode} with a body that is not JSON`));
        }
      });
      res.once('error', (error: Error) => finish(channel.fail('unreachable', `watchEvents: ${error.message}`)));
      return;
    }
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let newline = buffer.indexOf('\n');
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line.trim() !== '' && !onLine(line)) return;
        newline = buffer.indexOf('\n');
      }
      if (buffer.length > MAX_LINE_BYTES) broken(`a line over ${MAX_LINE_BYTES} bytes`);
    });
    res.once('end', () => {
      // A last line without its newline still counts.
      if (buffer.trim() !== '' && !onLine(buffer)) return;
      finish(channel.fail('unreachable', 'watchEvents: the node closed the stream without saying why'));
    });
    res.once('error', (error: Error) => finish(error instanceof Error && 'code' in error && (error as { code?: string }).code === 'deadline' ? error : channel.fail('unreachable', `watchEvents: ${error.message}`)));
    res.once('close', () => finish(channel.fail('unreachable', 'watchEvents: connection to the node lost')));
  });
}
