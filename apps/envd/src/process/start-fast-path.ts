import type { IncomingMessage, ServerResponse } from 'node:http';
import { create, fromBinary, fromJson, toBinary, toJsonString } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { StartRequestSchema, StartResponseSchema, type StartRequest } from '@tidepool/protocol/process';
import { keepaliveIntervalMs } from '../connect/keepalive.ts';
import type { EnvdContext } from '../context.ts';
import { startResponseJson } from './event-json.ts';
import type { ProcessEventInit } from './event-stream.ts';
import type { ProcessRegistry } from './process-registry.ts';
import { startProcessEvents } from './process-service.ts';

/**
 * `process.Process/Start` over the Connect streaming protocol, served straight from the HTTP request.
 *
 * Every `commands.run()` is one Start call, and connect-es's generic server path (web Headers and
 * AbortSignals per call, async-generator adapters between each layer, per-call handler contexts)
 * cost envd more CPU than spawning the command. This path speaks the same wire format for the
 * requests the SDK sends — a single uncompressed message, JSON or binary, optional timeout — and
 * answers with the same envelopes, end-stream message and error codes (and messages) as the Connect
 * handler; any request whose headers ask for more (compression, other content types, a malformed
 * timeout) is left to the Connect handler. The process logic itself is shared (startProcessEvents).
 */

export const START_PATH = '/process.Process/Start';

const CONTENT_TYPES = new Set(['application/connect+json', 'application/connect+proto']);
/** Largest request accepted (a Start request is a command line and its environment). */
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

const FLAG_COMPRESSED = 0x01;
const FLAG_END_STREAM = 0x02;

/** True when this path answers the request exactly as the Connect handler would. */
export function servesStart(req: IncomingMessage): boolean {
  if (req.method !== 'POST' || req.url !== START_PATH) return false;
  const type = req.headers['content-type'];
  if (type === undefined || !CONTENT_TYPES.has(type)) return false;
  const encoding = req.headers['connect-content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return false;
  const version = req.headers['connect-protocol-version'];
  if (version !== undefined && version !== '1') return false;
  const timeout = req.headers['connect-timeout-ms'];
  return timeout === undefined || (typeof timeout === 'string' && /^[1-9]\d{0,9}$/.test(timeout));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_REQUEST_BYTES) {
        req.destroy();
        reject(new ConnectError(`message size ${size} is larger than configured readMaxBytes ${MAX_REQUEST_BYTES}`, Code.ResourceExhausted));
        return;
      }
      parts.push(chunk);
    });
    req.once('end', () => resolve(parts.length === 1 ? parts[0] : Buffer.concat(parts)));
    req.once('error', reject);
  });
}

/** The one input message of a server-streaming call, with connect-es's protocol errors. */
export function decodeStartRequest(body: Buffer, json: boolean): StartRequest {
  let message: Buffer | undefined;
  let offset = 0;
  while (offset < body.length) {
    if (body.length - offset < 5) throw new ConnectError('protocol error: incomplete envelope', Code.InvalidArgument);
    const flags = body[offset];
    const length = body.readUInt32BE(offset + 1);
    if (body.length - offset - 5 < length) throw new ConnectError('protocol error: incomplete envelope', Code.InvalidArgument);
    const data = body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & FLAG_COMPRESSED) throw new ConnectError('received compressed envelope, but do not know how to decompress', Code.InvalidArgument);
    if (flags & FLAG_END_STREAM) continue;
    if (message !== undefined) throw new ConnectError('protocol error: received extra input message for server-streaming method', Code.Unimplemented);
    message = data;
  }
  if (message === undefined) throw new ConnectError('protocol error: missing input message for server-streaming method', Code.Unimplemented);
  if (!json) {
    try {
      return fromBinary(StartRequestSchema, message);
    } catch (error) {
      throw new ConnectError(`parse binary: ${(error as Error).message}`, Code.InvalidArgument);
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(message.toString('utf8'));
  } catch (error) {
    throw new ConnectError(`cannot decode message ${StartRequestSchema.typeName} from JSON: ${(error as Error).message}`, Code.InvalidArgument);
  }
  try {
    return fromJson(StartRequestSchema, value as Parameters<typeof fromJson>[1], { ignoreUnknownFields: true });
  } catch (error) {
    throw new ConnectError((error as Error).message, Code.InvalidArgument);
  }
}

function envelope(flags: number, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + payload.length);
  out[0] = flags;
  out.writeUInt32BE(payload.length, 1);
  out.set(payload, 5);
  return out;
}

/** The end-stream message: `{}` or `{"error":{"code","message"}}` (connect-es's JSON). */
export function endStreamMessage(error: unknown): Buffer {
  if (error === undefined) return envelope(FLAG_END_STREAM, Buffer.from('{}'));
  const connectError = ConnectError.from(error);
  const body: { code: string; message?: string } = { code: Code[connectError.code].replace(/[A-Z]/g, (c, i: number) => (i > 0 ? '_' : '') + c.toLowerCase()) };
  if (connectError.rawMessage) body.message = connectError.rawMessage;
  return envelope(FLAG_END_STREAM, Buffer.from(JSON.stringify({ error: body })));
}

function encodeEvent(event: ProcessEventInit, json: boolean): Buffer {
  const text = json ? startResponseJson(event) : undefined;
  if (text !== undefined) return envelope(0, Buffer.from(text));
  const message = create(StartResponseSchema, { event });
  return envelope(0, json ? Buffer.from(toJsonString(StartResponseSchema, message)) : toBinary(StartResponseSchema, message));
}

/** Serves one qualifying Start request to the end (never throws: failures end the stream with an error). */
export async function serveStart(req: IncomingMessage, res: ServerResponse, envd: EnvdContext, registry: ProcessRegistry): Promise<void> {
  const contentType = req.headers['content-type']!;
  const json = contentType === 'application/connect+json';
  const controller = new AbortController();
  const timeoutHeader = req.headers['connect-timeout-ms'];
  const timeoutMs = timeoutHeader === undefined ? undefined : Number(timeoutHeader);
  const deadline =
    timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(new ConnectError('the operation timed out', Code.DeadlineExceeded)), timeoutMs);
  const onClose = (): void => {
    if (!res.writableFinished) controller.abort();
  };
  res.once('close', onClose);
  let headSent = false;
  const sendHead = (): void => {
    if (headSent) return;
    headSent = true;
    res.writeHead(200, { 'content-type': contentType });
  };
  let failure: unknown;
  let last: Buffer | undefined;
  try {
    const request = decodeStartRequest(await readBody(req), json);
    const events = startProcessEvents(envd, registry, {
      request,
      authorization: req.headers.authorization,
      signal: controller.signal,
      timeoutMs,
      keepaliveMs: keepaliveIntervalMs({ get: (name) => headerValue(req, name) }),
    });
    for await (const event of events) {
      if (res.destroyed) break;
      sendHead();
      // The process's end goes out with the end-stream message: one write, one packet for the client to wake up for.
      if (event.event?.case === 'end') last = encodeEvent(event, json);
      else if (!res.write(encodeEvent(event, json))) await drained(res, controller.signal);
    }
  } catch (error) {
    failure = error;
  } finally {
    clearTimeout(deadline);
  }
  if (res.destroyed) return;
  sendHead();
  const end = endStreamMessage(failure);
  res.end(last ? Buffer.concat([last, end]) : end);
}

function headerValue(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name.toLowerCase()];
  return typeof value === 'string' ? value : null;
}

function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.once('drain', done);
    res.once('close', done);
    signal.addEventListener('abort', done);
  });
}
