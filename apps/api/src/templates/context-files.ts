import { createReadStream, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { invalid } from '../errors.ts';

const HASH = /^[0-9a-f]{64}$/;

export function checkFilesHash(hash: string): string {
  if (!HASH.test(hash)) throw invalid(`invalid files hash '${hash}': expected 64 lowercase hex characters (sha256)`);
  return hash;
}

const GZIP_MAGIC = [0x1f, 0x8b];

async function isGzip(path: string): Promise<boolean> {
  const file = await open(path, 'r');
  try {
    const head = Buffer.alloc(2);
    const { bytesRead } = await file.read(head, 0, 2, 0);
    return bytesRead === 2 && head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1];
  } finally {
    await file.close();
  }
}

/** Reads the whole archive (gunzipped when it is gzip): a truncated or non-tar upload fails here, not in a build. */
async function checkArchive(path: string): Promise<void> {
  const extract = tar.extract();
  extract.on('entry', (_header, stream, next) => {
    stream.on('end', next);
    stream.resume();
  });
  try {
    const source = createReadStream(path);
    await ((await isGzip(path)) ? pipeline(source, createGunzip(), extract) : pipeline(source, extract));
  } catch (error) {
    throw invalid(`the upload is not a complete tar archive (plain or gzipped): ${(error as Error).message}`);
  }
}

/**
 * Uploaded COPY context archives, stored by files hash under `<dataDir>/template-files`. An upload
 * is streamed to a temporary file, checked (size, tar or gzip) and only then renamed into place,
 * so a failed upload leaves nothing.
 */
export class ContextFiles {
  private readonly dir: string;

  constructor(dataDir: string, private readonly maxBytes: number) {
    this.dir = join(dataDir, 'template-files');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Temporary files of uploads cut short by a crash.
    for (const name of readdirSync(this.dir)) if (name.includes('.part-')) rmSync(join(this.dir, name), { force: true });
  }

  pathOf(hash: string): string | undefined {
    const path = join(this.dir, checkFilesHash(hash));
    return existsSync(path) ? path : undefined;
  }

  sizeOf(hash: string): number {
    return statSync(join(this.dir, checkFilesHash(hash))).size;
  }

  /** Stores one archive; `declaredLength` is the request's Content-Length (uploads are never chunked). */
  async receive(hash: string, body: Readable, declaredLength: number | undefined): Promise<number> {
    checkFilesHash(hash);
    if (declaredLength === undefined) throw invalid('the upload needs an exact Content-Length');
    if (declaredLength > this.maxBytes) throw invalid(`the archive is ${declaredLength} bytes; uploads are limited to ${this.maxBytes} bytes`);
    const final = join(this.dir, hash);
    const part = `${final}.part-${randomBytes(6).toString('hex')}`;
    let received = 0;
    // The file exists before anything is written: a failed upload's cleanup below cannot run before a stream's
    // asynchronous open and leave the file to be created after it.
    const handle = await open(part, 'wx', 0o600);
    try {
      const counter = async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          received += chunk.length;
          if (received > declaredLength) throw invalid(`the upload sent more than its Content-Length (${declaredLength} bytes)`);
          yield chunk;
        }
      };
      await pipeline(body, counter, handle.createWriteStream());
      if (received !== declaredLength) throw invalid(`the upload ended after ${received} of ${declaredLength} bytes`);
      await checkArchive(part);
      await rename(part, final);
      return received;
    } finally {
      await handle.close().catch(() => undefined);
      await rm(part, { force: true });
    }
  }

  async remove(hash: string): Promise<void> {
    await rm(join(this.dir, checkFilesHash(hash)), { force: true });
  }
}
