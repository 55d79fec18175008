import { request as httpRequest, Agent } from 'node:http';

/** A raw HTTP answer: status, headers and the whole body (or what arrived before the client gave up). */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** True when the client cut a still-open stream after its first message. */
  cut: boolean;
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });

export interface RawRequest {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** For server streams: stop reading (and count it as open) once one whole message envelope arrived. */
  cutAfterFirstMessage?: boolean;
  timeoutMs?: number;
}

/** Sends exactly the given bytes; never throws for an HTTP answer, only for transport failures. */
export function rawRequest(baseUrl: string, req: RawRequest): Promise<RawAnswer> {
  const url = new URL(req.path, baseUrl);
  return new Promise((resolve, reject) => {
    const call = httpRequest(
      { agent, method: req.method ?? 'POST', hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers: req.headers ?? {} },
      (res) => {
        const parts: Buffer[] = [];
        let settled = false;
        const finish = (cut: boolean): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts), cut });
        };
        const timer = setTimeout(() => {
          finish(true);
          call.destroy();
        }, req.timeoutMs ?? 10_000);
        res.on('data', (chunk: Buffer) => {
          parts.push(chunk);
          if (req.cutAfterFirstMessage && res.statusCode === 200 && hasWholeDataEnvelope(Buffer.concat(parts))) {
            finish(true);
            call.destroy();
          }
        });
        res.on('end', () => finish(false));
        res.on('error', () => finish(true));
        res.on('close', () => finish(true));
      },
    );
    call.on('error', reject);
    call.end(req.body ?? Buffer.alloc(0));
  });
}

function hasWholeDataEnvelope(bytes: Buffer): boolean {
  if (bytes.length < 5) return false;
  const length = bytes.readUInt32BE(1);
  return (bytes[0] & 0x02) === 0 && bytes.length >= 5 + length;
}

/** Wraps a message in a Connect envelope (flags byte plus big-endian length). */
export function envelope(payload: Buffer, flags = 0, declaredLength = payload.length): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(declaredLength >>> 0, 1);
  return Buffer.concat([head, payload]);
}

export interface Envelope {
  flags: number;
  payload: Buffer;
}

/** Splits a stream body into envelopes; throws on a truncated one. */
export function splitEnvelopes(body: Buffer): Envelope[] {
  const out: Envelope[] = [];
  let at = 0;
  while (at < body.length) {
    if (body.length - at < 5) throw new Error(`truncated envelope header at ${at}`);
    const length = body.readUInt32BE(at + 1);
    if (body.length - at - 5 < length) throw new Error(`truncated envelope payload at ${at}`);
    out.push({ flags: body[at], payload: body.subarray(at + 5, at + 5 + length) });
    at += 5 + length;
  }
  return out;
}

/** HTTP status of each Connect code for unary errors (Connect protocol spec). */
export const HTTP_STATUS_OF_CODE: Record<string, number> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

/** The outcome of one raw Connect call, reduced to what the fuzz suite asserts on. */
export type RpcOutcome = { kind: 'ok' } | { kind: 'error'; code: string; message: string } | { kind: 'http'; status: number };

function parseJsonError(bytes: Buffer): { code: string; message: string } {
  const parsed = JSON.parse(bytes.toString('utf8')) as { code?: unknown; message?: unknown };
  if (typeof parsed.code !== 'string') throw new Error(`error body without a code: ${bytes.toString('utf8').slice(0, 200)}`);
  return { code: parsed.code, message: typeof parsed.message === 'string' ? parsed.message : '' };
}

/**
 * Checks that an answer is well-formed Connect: a unary success, a unary JSON error whose status matches
 * its code, or a stream of envelopes closed by an end-stream message (error or not). A plain HTTP status
 * is allowed only for what the Connect spec answers outside the protocol (415 for unknown media types).
 */
export function classifyAnswer(answer: RawAnswer, streaming: boolean): RpcOutcome {
  const type = String(answer.headers['content-type'] ?? '');
  if (answer.status === 415) return { kind: 'http', status: 415 };
  if (!streaming || answer.status !== 200) {
    if (answer.status === 200) {
      if (!/^application\/(json|proto)/.test(type)) throw new Error(`unary success with content-type ${type}`);
      return { kind: 'ok' };
    }
    if (!type.startsWith('application/json')) throw new Error(`error ${answer.status} with content-type ${type}: ${answer.body.toString('utf8').slice(0, 200)}`);
    const error = parseJsonError(answer.body);
    const expected = HTTP_STATUS_OF_CODE[error.code];
    if (expected === undefined) throw new Error(`unknown Connect code ${error.code}`);
    if (expected !== answer.status) throw new Error(`code ${error.code} answered with HTTP ${answer.status}, expected ${expected}`);
    return { kind: 'error', ...error };
  }
  if (!/^application\/connect\+(json|proto)/.test(type)) throw new Error(`stream answered with content-type ${type}`);
  if (answer.cut) return { kind: 'ok' };
  const envelopes = splitEnvelopes(answer.body);
  const last = envelopes.at(-1);
  if (!last || (last.flags & 0x02) === 0) throw new Error('stream ended without an end-stream message');
  if (envelopes.slice(0, -1).some((e) => (e.flags & 0x02) !== 0)) throw new Error('end-stream message before the end');
  const end = JSON.parse(last.payload.toString('utf8')) as { error?: unknown };
  if (end.error === undefined) return { kind: 'ok' };
  const error = parseJsonError(Buffer.from(JSON.stringify(end.error)));
  if (HTTP_STATUS_OF_CODE[error.code] === undefined) throw new Error(`unknown Connect code ${error.code}`);
  return { kind: 'error', ...error };
}
