import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { boundaryOf, MultipartFormatError, type MultipartPart, MultipartReader } from './multipart-reader.ts';

const BOUNDARY = 'b0undary';

interface ReadPart {
  name: string | undefined;
  filename: string | undefined;
  data: Buffer;
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Feeds `body` to a reader in the given chunks and reads every part in full. */
async function parse(chunks: Buffer[]): Promise<ReadPart[]> {
  const parts: Array<Promise<ReadPart>> = [];
  const reader = new MultipartReader(BOUNDARY, (part: MultipartPart) => {
    parts.push(collect(part.body).then((data) => ({ name: part.name, filename: part.filename, data })));
  });
  const finished = once(reader, 'finish');
  for (const chunk of chunks) reader.write(chunk);
  reader.end();
  await finished;
  return Promise.all(parts);
}

function part(headers: string[], data: Buffer | string): Buffer {
  return Buffer.concat([Buffer.from(`--${BOUNDARY}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`), Buffer.from(data), Buffer.from('\r\n')]);
}

const closing = Buffer.from(`--${BOUNDARY}--\r\n`);

describe('MultipartReader', () => {
  const binary = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from(`\r\n--${BOUNDARY}x\r\n--${BOUNDARY.slice(0, 4)}\r\n`)]);
  const body = Buffer.concat([
    Buffer.from('preamble to be ignored\r\n'),
    part(['Content-Disposition: form-data; name="file"; filename="/home/user/a b.txt"', 'Content-Type: application/octet-stream'], binary),
    part(['content-disposition: form-data; name="file"'], 'a plain field\r\nwith lines'),
    part(['Content-Disposition: form-data; name="other"'], 'ignored by callers, still a part'),
    part(['Content-Disposition: form-data; name="file"; filename*=UTF-8\'\'%2Ftmp%2Fcaf%C3%A9.txt'], ''),
    closing,
    Buffer.from('epilogue\r\n'),
  ]);
  const expected: ReadPart[] = [
    { name: 'file', filename: '/home/user/a b.txt', data: binary },
    { name: 'file', filename: undefined, data: Buffer.from('a plain field\r\nwith lines') },
    { name: 'other', filename: undefined, data: Buffer.from('ignored by callers, still a part') },
    { name: 'file', filename: '/tmp/café.txt', data: Buffer.alloc(0) },
  ];

  it('streams files and plain fields byte for byte, keeping paths, whole or byte by byte', async () => {
    expect(await parse([body])).toEqual(expected);
    expect(await parse(Array.from(body, (byte) => Buffer.of(byte)))).toEqual(expected);
  });

  it('gives the same parts wherever the body is split', async () => {
    for (let at = 1; at < body.length; at += 7) {
      expect(await parse([body.subarray(0, at), body.subarray(at)])).toEqual(expected);
    }
  });

  it('accepts a body without preamble, blanks after a delimiter and a part without headers', async () => {
    const raw = Buffer.from(`--${BOUNDARY} \t\r\n\r\nno headers\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name=file\r\n\r\nx\r\n--${BOUNDARY}--`);
    expect(await parse([raw])).toEqual([
      { name: undefined, filename: undefined, data: Buffer.from('no headers') },
      { name: 'file', filename: undefined, data: Buffer.from('x') },
    ]);
  });

  it('utf-8 filenames are read as utf-8', async () => {
    const raw = Buffer.concat([part(['Content-Disposition: form-data; name="file"; filename="/tmp/naïve-日本.txt"'], 'u'), closing]);
    expect((await parse([raw]))[0].filename).toBe('/tmp/naïve-日本.txt');
  });

  it('fails a body cut short, and the part being read with it', async () => {
    const cut = part(['Content-Disposition: form-data; name="file"; filename="x"'], 'partial').subarray(0, -2);
    let partError: unknown;
    const reader = new MultipartReader(BOUNDARY, (p) => {
      collect(p.body).catch((error: unknown) => {
        partError = error;
      });
    });
    const failed = once(reader, 'error');
    reader.end(cut);
    const [error] = await failed;
    expect(error).toBeInstanceOf(MultipartFormatError);
    await new Promise((resolve) => setImmediate(resolve));
    expect(partError).toBe(error);
  });

  it('fails bodies without any delimiter, with bad boundary lines or endless headers', async () => {
    await expect(parse([Buffer.from('no multipart here')])).rejects.toBeInstanceOf(MultipartFormatError);
    await expect(parse([Buffer.from(`--${BOUNDARY}junk\r\n`)])).rejects.toBeInstanceOf(MultipartFormatError);
    await expect(parse([Buffer.from(`--${BOUNDARY}\r\nbroken header\r\n\r\nx\r\n--${BOUNDARY}--`)])).rejects.toThrow(/malformed part header/);
    await expect(parse([Buffer.from(`--${BOUNDARY}\r\nX-Big: ${'y'.repeat(20_000)}`)])).rejects.toThrow(/too large/);
  });

  it('holds the writer while a part is not read, and goes on once it is', async () => {
    let body: Readable | undefined;
    const reader = new MultipartReader(BOUNDARY, (p) => {
      body = p.body;
    });
    const payload = randomBytes(4 * 1024 * 1024);
    const chunk = 64 * 1024;
    reader.write(part(['Content-Disposition: form-data; name="file"; filename="big"'], '').subarray(0, -2));
    let accepted = 0;
    while (accepted < payload.length && reader.write(payload.subarray(accepted, accepted + chunk))) accepted += chunk;
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Well before the whole payload: the reader's buffer plus the writer's high-water mark.
    expect(reader.writableNeedDrain).toBe(true);
    expect(body!.readableLength).toBeLessThanOrEqual(512 * 1024);
    const rest = (async () => {
      for (let at = accepted + chunk; at < payload.length; at += chunk) {
        if (!reader.write(payload.subarray(at, at + chunk))) await once(reader, 'drain');
      }
      reader.end(Buffer.concat([Buffer.from('\r\n'), closing]));
    })();
    expect((await collect(body!)).equals(payload)).toBe(true);
    await rest;
  });

  it('reads large parts one after another, as the uploads do, from a single write', async () => {
    const payloads = [randomBytes(1024 * 1024), randomBytes(700 * 1024), Buffer.from('small')];
    let chain: Promise<Buffer[]> = Promise.resolve([]);
    const reader = new MultipartReader(BOUNDARY, (p) => {
      chain = chain.then(async (done) => [...done, await collect(p.body)]);
    });
    const finished = once(reader, 'finish');
    reader.end(Buffer.concat([...payloads.map((data, i) => part([`Content-Disposition: form-data; name="file"; filename="${i}"`], data)), closing]));
    await finished;
    const read = await chain;
    expect(read.length).toBe(3);
    read.forEach((data, i) => expect(data.equals(payloads[i])).toBe(true));
  });

  it('drops the content of a part its reader destroyed and parses on', async () => {
    const names: Array<string | undefined> = [];
    const contents: Array<Promise<Buffer>> = [];
    const reader = new MultipartReader(BOUNDARY, (p) => {
      names.push(p.filename);
      if (p.filename === 'dropped') p.body.destroy();
      else contents.push(collect(p.body));
    });
    const finished = once(reader, 'finish');
    reader.end(Buffer.concat([
      part(['Content-Disposition: form-data; name="file"; filename="dropped"'], randomBytes(1024 * 1024)),
      part(['Content-Disposition: form-data; name="file"; filename="kept"'], 'kept'),
      closing,
    ]));
    await finished;
    expect(names).toEqual(['dropped', 'kept']);
    expect((await Promise.all(contents)).map(String)).toEqual(['kept']);
  });
});

describe('MultipartReader with a reader that gives up mid-part', () => {
  it('goes on with the next part once a saturated part is destroyed', async () => {
    const seen: Array<string | undefined> = [];
    let kept: Promise<Buffer> | undefined;
    const reader = new MultipartReader(BOUNDARY, (p) => {
      seen.push(p.filename);
      if (p.filename === 'abandoned') setTimeout(() => p.body.destroy(), 20); // never read, then dropped
      else kept = collect(p.body);
    });
    const finished = once(reader, 'finish');
    const body = Buffer.concat([
      part(['Content-Disposition: form-data; name="file"; filename="abandoned"'], randomBytes(2 * 1024 * 1024)),
      part(['Content-Disposition: form-data; name="file"; filename="kept"'], 'kept'),
      closing,
    ]);
    // In socket-sized chunks, so the parser blocks on the abandoned part before its end arrives.
    for (let at = 0; at < body.length; at += 64 * 1024) {
      if (!reader.write(body.subarray(at, at + 64 * 1024))) await once(reader, 'drain');
    }
    reader.end();
    await finished;
    expect(seen).toEqual(['abandoned', 'kept']);
    expect(String(await kept)).toBe('kept');
  });
});

describe('boundaryOf', () => {
  it('reads plain and quoted boundaries and refuses a content type without one', () => {
    expect(boundaryOf('multipart/form-data; boundary=----WebKitFormBoundaryX1')).toBe('----WebKitFormBoundaryX1');
    expect(boundaryOf('multipart/form-data; charset=utf-8; boundary="a b;c"')).toBe('a b;c');
    expect(() => boundaryOf('multipart/form-data')).toThrow(MultipartFormatError);
    expect(() => boundaryOf(`multipart/form-data; boundary=${'x'.repeat(201)}`)).toThrow(MultipartFormatError);
  });
});
