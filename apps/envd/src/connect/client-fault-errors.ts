import type { UniversalHandler, UniversalServerResponse } from '@connectrpc/connect/protocol';

/**
 * connect-es reports some faults of the client's request as `internal`: a binary message that does
 * not parse, a compressed envelope without a negotiated encoding. They are the caller's mistake, so
 * envd answers them as `invalid_argument` (HTTP 400 for unary calls), like bad JSON already is.
 */
const CLIENT_FAULT_MESSAGES = [/^parse binary: /, /^received compressed envelope, but do not know how to decompress/, /^invalid envelope/];

function isClientFault(error: unknown): error is { code: string; message?: string } {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === 'internal' && typeof message === 'string' && CLIENT_FAULT_MESSAGES.some((pattern) => pattern.test(message));
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return undefined;
  }
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of body) parts.push(part);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** A unary error answer: the whole JSON body is read (they are small) and its code corrected. */
async function reclassifyUnary(res: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (res.status !== 500 || res.body === undefined) return res;
  const bytes = await collect(res.body);
  const error = parseJson(bytes);
  if (!isClientFault(error)) return { ...res, body: once(bytes) };
  const body = Buffer.from(JSON.stringify({ ...error, code: 'invalid_argument' }));
  const header = new Headers(res.header);
  if (header.has('content-length')) header.set('content-length', String(body.length));
  return { ...res, status: 400, header, body: once(body) };
}

/** Rewrites an uncompressed end-stream envelope (one envelope per chunk, as connect-es writes them). */
function reclassifyEndStream(chunk: Uint8Array): Uint8Array {
  if (chunk.length < 5 || chunk[0] !== 0x02) return chunk;
  const length = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).readUInt32BE(1);
  if (length !== chunk.length - 5) return chunk;
  const end = parseJson(chunk.subarray(5)) as { error?: unknown } | undefined;
  if (!end || !isClientFault(end.error)) return chunk;
  const payload = Buffer.from(JSON.stringify({ ...end, error: { ...end.error, code: 'invalid_argument' } }));
  const head = Buffer.alloc(5);
  head[0] = 0x02;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

async function* reclassifyStream(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of body) yield reclassifyEndStream(chunk);
}

function wrap(handler: UniversalHandler): UniversalHandler {
  const streaming = handler.method.methodKind !== 'unary';
  const wrapped = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    if (!streaming) return reclassifyUnary(res);
    return res.body === undefined ? res : { ...res, body: reclassifyStream(res.body) };
  };
  return Object.assign(wrapped, handler);
}

/** Replaces each handler of a Connect router by one that answers client faults as `invalid_argument`. */
export function reclassifyClientFaults(handlers: UniversalHandler[]): void {
  for (let i = 0; i < handlers.length; i++) handlers[i] = wrap(handlers[i]);
}
