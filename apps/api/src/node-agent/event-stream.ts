/**
 * `POST /v1/runtime/watchEvents`: the runtime's engine events as NDJSON. The first line (`{"connected":true}`)
 * says the agent is following its engine; then one `{"event":{…}}` line per event; the last line
 * (`{"ended":null}` or `{"ended":{"message":…}}`) says how the engine's stream ended. The client closing the
 * response closes the engine stream. A client that stops reading is cut off rather than buffered without end.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { EngineEvent } from '../runtime/engine-events.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { encodeError } from '../nodes/node-channel-errors.ts';
import { sendJson } from './agent-responses.ts';

/** Unread event lines a client may leave queued before its stream is closed. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

export async function serveEvents(runtime: SandboxRuntime, since: number | null, request: IncomingMessage, response: ServerResponse, logger: Logger): Promise<void> {
  if (!runtime.watchEvents) {
    sendJson(response, 501, { error: { code: 'engine', message: "this node's runtime reports no engine events" } });
    return;
  }
  const pending: EngineEvent[] = [];
  let writeLine: ((event: EngineEvent) => void) | undefined;
  let stream;
  try {
    stream = await runtime.watchEvents(since ?? undefined, (event) => (writeLine ? writeLine(event) : pending.push(event)));
  } catch (error) {
    sendJson(response, 502, { error: encodeError(error) });
    return;
  }
  // (The request itself is done once its body was read; whether the client is still there is the socket's say.)
  if (response.destroyed || request.socket.destroyed) {
    stream.close();
    return;
  }
  response.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  response.write('{"connected":true}\n');
  writeLine = (event) => {
    if (response.destroyed) return;
    const line = { event: { kind: event.kind, containerId: event.containerId, sandboxId: event.sandboxId, exitCode: event.exitCode ?? null, time: event.time } };
    response.write(`${JSON.stringify(line)}\n`);
    if (response.writableLength > MAX_BUFFERED_BYTES) {
      logger.warn({ buffered: response.writableLength }, 'event stream client is not reading: closing its stream');
      response.destroy();
    }
  };
  for (const event of pending.splice(0)) writeLine(event);
  response.once('close', () => stream.close());
  const ended = await stream.ended;
  if (!response.destroyed) response.end(`${JSON.stringify({ ended: ended ? { message: ended.message.slice(0, 4096) } : null })}\n`);
}
