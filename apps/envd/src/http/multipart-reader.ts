import { Readable, Writable } from 'node:stream';
import { parseHeaderValue } from './header-params.ts';

/** The body is not valid `multipart/form-data` (no boundary, bad framing, cut short). */
export class MultipartFormatError extends Error {}

export interface MultipartPart {
  /** `name` of the part's Content-Disposition; undefined when it has none or no usable disposition. */
  name: string | undefined;
  /** `filename` (or `filename*`) of the part, exactly as sent (paths are kept); undefined when absent. */
  filename: string | undefined;
  /** The part's content, raw bytes, whatever kind of part it is (file or plain field). */
  body: Readable;
}

const CR = 0x0d;
const LF = 0x0a;
const DASH = 0x2d;
const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const MAX_HEADER_BYTES = 16 * 1024;
const MAX_BOUNDARY_LINE_BYTES = 1024;
const PART_HIGH_WATER_MARK = 256 * 1024;

/** The boundary of a `multipart/*` Content-Type (1 to 200 characters). */
export function boundaryOf(contentType: string): string {
  const boundary = parseHeaderValue(contentType)?.params.get('boundary');
  if (!boundary || boundary.length > 200) throw new MultipartFormatError('the content type has no usable boundary');
  return boundary;
}

function parsePartHeaders(block: string): Map<string, string> {
  const headers = new Map<string, string>();
  let last: string | undefined;
  for (const line of block.split('\r\n')) {
    if (line === '') continue;
    if ((line[0] === ' ' || line[0] === '\t') && last !== undefined) {
      headers.set(last, `${headers.get(last)} ${line.trim()}`); // obsolete line folding
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) throw new MultipartFormatError(`malformed part header line '${line.slice(0, 100)}'`);
    last = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(last)) headers.set(last, line.slice(colon + 1).trim());
    else last = undefined;
  }
  return headers;
}

type State = 'preamble' | 'boundary-line' | 'headers' | 'body' | 'done';

/**
 * A streaming `multipart/form-data` parser: write the body into it, and `onPart` receives each part
 * as it starts, its content as a stream of raw bytes. File parts and plain fields alike are streamed,
 * never buffered whole nor decoded as text. A part's stream must be consumed (or resumed) for the
 * parser to go on: its backpressure holds the writes. A body that ends before the closing delimiter,
 * or a parser destroyed mid-part, fails the current part's stream with the error.
 *
 * As in RFC 2046, a delimiter is `CRLF--boundary` followed by `--` or by optional blanks and CRLF;
 * the same bytes followed by anything else are content.
 */
export class MultipartReader extends Writable {
  private readonly delimiter: Buffer;
  /** Unparsed input. It starts with a CRLF so that a delimiter opening the body is found like any other. */
  private buffered: Buffer = CRLF;
  private state: State = 'preamble';
  private part: Readable | undefined;
  /** The callback of the write being parsed, held while the current part's reader is saturated. */
  private pendingCallback: ((error?: Error | null) => void) | undefined;
  private blocked = false;
  private parsing = false;
  /** Counts the part stream's read requests, so a request made while pushing is not lost. */
  private readRequests = 0;

  constructor(boundary: string, private readonly onPart: (part: MultipartPart) => void) {
    super();
    this.delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.state === 'done') {
      callback(); // the epilogue is ignored
      return;
    }
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    this.pendingCallback = callback;
    this.parse();
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.state === 'done') {
      callback();
      return;
    }
    const error = new MultipartFormatError('the multipart body ended before its closing delimiter');
    this.part?.destroy(error);
    this.part = undefined;
    callback(error);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.part && !this.part.readableEnded) this.part.destroy(error ?? new MultipartFormatError('the multipart body was abandoned mid-part'));
    this.part = undefined;
    this.pendingCallback = undefined;
    callback(error);
  }

  /** Parses as far as the input and the current part's reader allow, then releases the write. */
  private parse(): void {
    if (this.parsing) return;
    this.parsing = true;
    let failure: Error | undefined;
    try {
      while (!this.blocked && this.step());
    } catch (error) {
      failure = error as Error;
    } finally {
      this.parsing = false;
    }
    if (this.blocked && !failure) return;
    const callback = this.pendingCallback;
    this.pendingCallback = undefined;
    callback?.(failure);
  }

  private readonly onPartRead = (): void => {
    this.readRequests++;
    if (!this.blocked) return;
    this.blocked = false;
    this.parse();
  };

  private pushToPart(bytes: Buffer): void {
    const part = this.part;
    if (!part || bytes.length === 0 || part.destroyed) return; // a destroyed part's content is dropped
    const requests = this.readRequests;
    if (!part.push(bytes) && this.readRequests === requests) this.blocked = true;
  }

  /** Ends the current part. Its reader may still be busy; the next part gets its own backpressure. */
  private endPart(): void {
    this.part?.push(null);
    this.part = undefined;
    this.blocked = false;
  }

  /**
   * Where the next delimiter starts: `at` -1 when there is none in the input, `complete` false when
   * the bytes after it, which tell a delimiter from content, have not arrived yet.
   */
  private findDelimiter(): { at: number; complete: boolean } {
    const input = this.buffered;
    let from = 0;
    for (;;) {
      const at = input.indexOf(this.delimiter, from);
      if (at < 0) return { at: -1, complete: true };
      const after = at + this.delimiter.length;
      if (input.length < after + 2) return { at, complete: false };
      const first = input[after];
      const second = input[after + 1];
      if ((first === DASH && second === DASH) || first === 0x20 || first === 0x09 || (first === CR && second === LF)) return { at, complete: true };
      from = at + 1;
    }
  }

  /** One parsing step; false when more input is needed. */
  private step(): boolean {
    switch (this.state) {
      case 'preamble':
      case 'body': {
        const { at, complete } = this.findDelimiter();
        // Content up to a possible delimiter, or all but the tail that could begin one.
        const safe = at >= 0 ? at : Math.max(0, this.buffered.length - (this.delimiter.length - 1));
        if (this.state === 'body') this.pushToPart(this.buffered.subarray(0, safe));
        if (at < 0 || !complete) {
          this.buffered = this.buffered.subarray(safe);
          return false;
        }
        this.buffered = this.buffered.subarray(at + this.delimiter.length);
        if (this.state === 'body') this.endPart();
        this.state = 'boundary-line';
        return true;
      }
      case 'boundary-line': {
        if (this.buffered.length < 2) return false;
        if (this.buffered[0] === DASH && this.buffered[1] === DASH) {
          this.state = 'done';
          this.buffered = Buffer.alloc(0);
          return false;
        }
        const end = this.buffered.indexOf(CRLF);
        if (end < 0) {
          if (this.buffered.length > MAX_BOUNDARY_LINE_BYTES) throw new MultipartFormatError('malformed boundary line');
          return false;
        }
        if (!/^[ \t]*$/.test(this.buffered.toString('latin1', 0, end))) throw new MultipartFormatError('malformed boundary line');
        this.buffered = this.buffered.subarray(end + 2);
        this.state = 'headers';
        return true;
      }
      case 'headers': {
        if (this.buffered.length < 2) return false;
        const empty = this.buffered[0] === CR && this.buffered[1] === LF;
        const end = empty ? 0 : this.buffered.indexOf(HEADER_END);
        if (end < 0) {
          if (this.buffered.length > MAX_HEADER_BYTES) throw new MultipartFormatError('part headers are too large');
          return false;
        }
        const headers = parsePartHeaders(this.buffered.toString('utf8', 0, end));
        this.buffered = this.buffered.subarray(empty ? 2 : end + HEADER_END.length);
        this.startPart(headers);
        this.state = 'body';
        return true;
      }
      case 'done':
        return false;
    }
  }

  private startPart(headers: Map<string, string>): void {
    const disposition = parseHeaderValue(headers.get('content-disposition') ?? '');
    const isFormData = disposition?.type === 'form-data';
    const part = new Readable({ highWaterMark: PART_HIGH_WATER_MARK, read: this.onPartRead });
    // A part destroyed by its reader never reads again: release the parser (the rest is dropped).
    part.once('close', () => {
      if (this.part === part) this.onPartRead();
    });
    this.part = part;
    this.onPart({
      name: isFormData ? disposition.params.get('name') : undefined,
      filename: isFormData ? disposition.params.get('filename') : undefined,
      body: part,
    });
  }
}
