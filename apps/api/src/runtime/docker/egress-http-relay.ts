/**
 * Relays HTTP/1.x requests from a sandbox to one destination, rewriting each request's head (every request
 * of a keep-alive connection, pipelined ones included): the transform's headers replace any the sandbox sent
 * under the same names. Bodies are passed through as framed by Content-Length or chunked encoding, which are
 * read strictly (an ambiguous request is refused, never guessed at: the destination must see exactly the
 * requests the proxy saw). Responses are not touched. After an Upgrade (WebSocket) or CONNECT the rest of the
 * connection is relayed as it is.
 */
import type { Duplex, Readable, Writable } from 'node:stream';

/** Largest request head, and largest chunk-size or trailer line. */
export const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 8 * 1024;

/** A request the relay refuses; `status` is what the sandbox is answered when nothing was relayed yet. */
export class EgressRequestError extends Error {
  /** Requests relayed on the connection before this one (0: the sandbox may still be answered). */
  relayed = 0;

  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'EgressRequestError';
  }
}

const bad = (message: string): EgressRequestError => new EgressRequestError(400, message);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

/** Pulls bytes from a stream: whole heads, lines, or counted bytes. */
class ByteReader {
  private buffered: Buffer;
  private readonly iterator: AsyncIterator<Buffer>;
  private ended = false;

  constructor(source: Readable, initial: Buffer) {
    this.buffered = initial;
    this.iterator = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  private async more(): Promise<boolean> {
    if (this.ended) return false;
    const next = await this.iterator.next();
    if (next.done) {
      this.ended = true;
      return false;
    }
    this.buffered = this.buffered.length === 0 ? next.value : Buffer.concat([this.buffered, next.value]);
    return true;
  }

  /** Bytes up to and including `terminator`; undefined at a clean end (nothing buffered). */
  async until(terminator: Buffer, max: number, what: string): Promise<Buffer | undefined> {
    let from = 0;
    for (;;) {
      const at = this.buffered.indexOf(terminator, from);
      if (at >= 0) {
        if (at + terminator.length > max) throw bad(`${what} is larger than ${max} bytes`);
        const out = this.buffered.subarray(0, at + terminator.length);
        this.buffered = this.buffered.subarray(at + terminator.length);
        return out;
      }
      if (this.buffered.length > max) throw bad(`${what} is larger than ${max} bytes`);
      from = Math.max(0, this.buffered.length - terminator.length + 1);
      if (!(await this.more())) {
        if (this.buffered.length === 0) return undefined;
        throw bad(`the connection ended inside ${what}`);
      }
    }
  }

  /** Passes exactly `count` bytes to `write`. */
  async take(count: number, write: (chunk: Buffer) => Promise<void>): Promise<void> {
    let left = count;
    while (left > 0) {
      if (this.buffered.length === 0 && !(await this.more())) throw bad('the connection ended inside a request body');
      const piece = this.buffered.subarray(0, Math.min(left, this.buffered.length));
      this.buffered = this.buffered.subarray(piece.length);
      left -= piece.length;
      await write(piece);
    }
  }

  /** Everything left, as it comes. */
  async drain(write: (chunk: Buffer) => Promise<void>): Promise<void> {
    if (this.buffered.length > 0) await write(this.buffered);
    this.buffered = Buffer.alloc(0);
    while (await this.more()) {
      const chunk = this.buffered;
      this.buffered = Buffer.alloc(0);
      await write(chunk);
    }
  }
}

export interface RequestHead {
  method: string;
  target: string;
  version: string;
  /** Header lines as sent (name, value), in order. */
  headers: Array<[string, string]>;
}

/** Parses a request head strictly: CRLF line ends, no obsolete line folding, token names, no space before ':'. */
export function parseRequestHead(head: Buffer): RequestHead {
  const text = head.toString('latin1');
  const lines = text.slice(0, -4).split('\r\n');
  const requestLine = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/(1\.[01])$/.exec(lines[0]!);
  if (!requestLine) throw bad('malformed request line');
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    if (/[\r\n\0]/.test(line)) throw bad('a header line holds a bare CR, LF or NUL');
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!TOKEN.test(name)) throw bad('malformed header line (obsolete line folding or an invalid name)');
    headers.push([name, line.slice(colon + 1).trim()]);
  }
  return { method: requestLine[1]!, target: requestLine[2]!, version: requestLine[3]!, headers };
}

const values = (head: RequestHead, name: string): string[] => head.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);

/** How the body of a request is framed. */
export function bodyFraming(head: RequestHead): { chunked: true } | { length: number } {
  const encodings = values(head, 'transfer-encoding');
  const lengths = values(head, 'content-length');
  if (encodings.length > 0) {
    if (lengths.length > 0) throw bad('a request with both Transfer-Encoding and Content-Length is refused');
    const codings = encodings.join(',').split(',').map((c) => c.trim().toLowerCase()).filter(Boolean);
    if (codings.at(-1) !== 'chunked' || codings.filter((c) => c === 'chunked').length !== 1) throw bad('Transfer-Encoding must end in a single chunked');
    return { chunked: true };
  }
  const distinct = new Set(lengths.flatMap((v) => v.split(',').map((x) => x.trim())));
  if (distinct.size > 1) throw bad('conflicting Content-Length values');
  if (distinct.size === 0) return { length: 0 };
  const length = [...distinct][0]!;
  if (!/^\d{1,15}$/.test(length)) throw bad('Content-Length is not a number');
  return { length: Number(length) };
}

/** The Host of a request (port and a trailing dot dropped, lower-cased); undefined when absent or repeated. */
export function requestHost(head: RequestHead): string | undefined {
  const hosts = values(head, 'host');
  if (hosts.length !== 1) return undefined;
  const host = hosts[0]!.toLowerCase();
  if (host.startsWith('[')) return undefined;
  return host.replace(/:\d*$/, '').replace(/\.$/, '');
}

/** The head with `inject` set: the sandbox's headers of those names are dropped, the new ones appended. */
export function rewriteHead(head: RequestHead, inject: Array<[string, string]>): Buffer {
  const replaced = new Set(inject.map(([name]) => name.toLowerCase()));
  const kept = head.headers.filter(([name]) => !replaced.has(name.toLowerCase()));
  const lines = [`${head.method} ${head.target} HTTP/${head.version}`, ...[...kept, ...inject].map(([name, value]) => `${name}: ${value}`)];
  // Injected values are UTF-8 (secrets); the sandbox's own bytes go back exactly as they came (latin1 round trip).
  return Buffer.concat([...lines.map((line, i) => Buffer.from(`${line}\r\n`, i > kept.length ? 'utf8' : 'latin1')), CRLF]);
}

function isUpgrade(head: RequestHead): boolean {
  if (head.method === 'CONNECT') return true;
  const connection = values(head, 'connection').join(',').toLowerCase().split(',').map((t) => t.trim());
  return connection.includes('upgrade') && values(head, 'upgrade').length > 0;
}

export interface RelayOptions {
  /** The name the connection was decided (and dialed) by: every request's Host must be this name. */
  host: string;
  /** The headers to set on the next request, resolved now (secrets at request time). */
  headers: () => Promise<Array<[string, string]>>;
  /** Bytes already read from the sandbox (the first request head, or part of it). */
  initial?: Buffer;
  /** Told after each request head is relayed. */
  onRequest?: (head: RequestHead) => void;
}

function writer(sink: Writable): (chunk: Buffer) => Promise<void> {
  return (chunk) =>
    new Promise((resolve, reject) => {
      if (sink.destroyed || sink.writableEnded) {
        reject(new Error('the destination connection closed'));
        return;
      }
      if (sink.write(chunk)) resolve();
      else {
        const done = (): void => {
          sink.off('drain', done);
          sink.off('close', done);
          if (sink.destroyed) reject(new Error('the destination connection closed'));
          else resolve();
        };
        sink.on('drain', done);
        sink.on('close', done);
      }
    });
}

/**
 * Relays requests from `source` to `sink` until the sandbox ends its side (then the sink's is ended too).
 * Throws an EgressRequestError for a request it refuses (its `relayed`: how many went through before).
 */
export async function relayRequests(source: Readable, sink: Duplex | Writable, options: RelayOptions): Promise<void> {
  const reader = new ByteReader(source, options.initial ?? Buffer.alloc(0));
  const write = writer(sink);
  let relayed = 0;
  try {
    for (;;) {
      const raw = await reader.until(HEAD_END, MAX_HEAD_BYTES, 'the request head');
      if (raw === undefined) break;
      const head = parseRequestHead(raw);
      if (!head.target.startsWith('/') && head.target !== '*') throw bad('only origin-form request targets ("/path") are relayed to a destination with transforms');
      const host = requestHost(head);
      if (host !== options.host) throw new EgressRequestError(421, `the request's Host (${host ?? 'none'}) is not the destination this connection was opened for (${options.host})`);
      const framing = bodyFraming(head);
      const upgrade = isUpgrade(head);
      await write(rewriteHead(head, await options.headers()));
      relayed += 1;
      options.onRequest?.(head);
      if ('length' in framing) await reader.take(framing.length, write);
      else await relayChunked(reader, write);
      if (upgrade) {
        await reader.drain(write);
        break;
      }
    }
    sink.end();
  } catch (error) {
    if (error instanceof EgressRequestError) error.relayed = relayed;
    throw error;
  }
}

async function relayChunked(reader: ByteReader, write: (chunk: Buffer) => Promise<void>): Promise<void> {
  for (;;) {
    const line = await reader.until(CRLF, MAX_LINE_BYTES, 'a chunk size line');
    if (line === undefined) throw bad('the connection ended inside a chunked body');
    const size = /^([0-9a-fA-F]{1,12})(;[^\r\n]*)?\r\n$/.exec(line.toString('latin1'));
    if (!size) throw bad('malformed chunk size line');
    await write(line);
    const bytes = parseInt(size[1]!, 16);
    if (bytes === 0) break;
    await reader.take(bytes, write);
    const end = await reader.until(CRLF, 2, 'a chunk end');
    if (end === undefined || end.length !== 2) throw bad('a chunk does not end with CRLF');
    await write(end);
  }
  // Trailer fields, then the empty line.
  for (let total = 0; ; ) {
    const line = await reader.until(CRLF, MAX_LINE_BYTES, 'a trailer line');
    if (line === undefined) throw bad('the connection ended inside the trailer');
    total += line.length;
    if (total > MAX_HEAD_BYTES) throw bad('the trailer is too large');
    if (/[\r\n\0]/.test(line.subarray(0, -2).toString('latin1'))) throw bad('a trailer line holds a bare CR, LF or NUL');
    await write(line);
    if (line.length === 2) return;
  }
}

/** A short plain-text HTTP answer to the sandbox (the connection is closed after it). */
export function errorResponse(status: number, message: string): Buffer {
  const reason: Record<number, string> = { 400: 'Bad Request', 421: 'Misdirected Request', 502: 'Bad Gateway' };
  const body = `tidepool egress proxy: ${message}\n`;
  return Buffer.from(`HTTP/1.1 ${status} ${reason[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
