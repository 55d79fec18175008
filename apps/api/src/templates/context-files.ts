import { createReadStream, existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { link, mkdir, open, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import { invalid, PlatformError } from '../errors.ts';

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

/** A team id as a directory name (ids are UUIDs; anything else is refused rather than made into a path). */
const TEAM_DIRECTORY = /^[A-Za-z0-9_-]{1,128}$/;

function teamDirectory(teamId: string): string {
  if (!TEAM_DIRECTORY.test(teamId)) throw new PlatformError('internal', 'a team id cannot name a context directory');
  return teamId;
}

/**
 * Uploaded COPY context archives, stored per team by files hash under `<dataDir>/template-files/<teamId>/<hash>`.
 * The hash is the client's (the SDK's hash of paths, modes and contents, not of the archive's bytes), so it is
 * trusted only within the team that uploaded it: one team's hashes never reach another's files. An upload is
 * streamed to a temporary file, checked (size, tar or gzip) and only then linked into place without replacing:
 * a hash already stored keeps its first archive, so an upload never changes what an earlier one stored (a
 * failed upload leaves nothing).
 */
export class ContextFiles {
  private readonly dir: string;

  constructor(dataDir: string, private readonly maxBytes: number) {
    this.dir = join(dataDir, 'template-files');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Files beside the teams' directories: uploads cut short by a crash, and archives of the unscoped store (before
    // teams had their own) that no team can be told to own (a build asks for its upload again).
    for (const entry of readdirSync(this.dir, { withFileTypes: true })) if (entry.isFile()) rmSync(join(this.dir, entry.name), { force: true });
  }

  private path(teamId: string, hash: string): string {
    return join(this.dir, teamDirectory(teamId), checkFilesHash(hash));
  }

  /** The team's archive of `hash`, undefined when the team never uploaded it. */
  pathOf(teamId: string, hash: string): string | undefined {
    const path = this.path(teamId, hash);
    return existsSync(path) ? path : undefined;
  }

  sizeOf(teamId: string, hash: string): number {
    return statSync(this.path(teamId, hash)).size;
  }

  /**
   * Stores one archive of the team's; `declaredLength` is the request's Content-Length (uploads are never chunked).
   * Answers the size of the archive stored under the hash: the first one when the hash was stored already.
   */
  async receive(teamId: string, hash: string, body: Readable, declaredLength: number | undefined): Promise<number> {
    const final = this.path(teamId, hash);
    if (declaredLength === undefined) throw invalid('the upload needs an exact Content-Length');
    if (declaredLength > this.maxBytes) throw invalid(`the archive is ${declaredLength} bytes; uploads are limited to ${this.maxBytes} bytes`);
    // Written beside the teams' directories: a refused upload leaves nothing, not even a team directory.
    const part = join(this.dir, `upload.part-${randomBytes(6).toString('hex')}`);
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
      try {
        await mkdir(join(this.dir, teamDirectory(teamId)), { recursive: true, mode: 0o700 });
        // A link fails when the name exists: unlike a rename, it never replaces a stored archive.
        await link(part, final);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        return (await stat(final)).size;
      }
      return received;
    } finally {
      await handle.close().catch(() => undefined);
      await rm(part, { force: true });
    }
  }

  async remove(teamId: string, hash: string): Promise<void> {
    await rm(this.path(teamId, hash), { force: true });
  }
}
