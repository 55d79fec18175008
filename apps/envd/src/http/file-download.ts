import { promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { basename } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGzip, gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { resolvePath } from '../identity/resolve-path.ts';
import { parseByteRange } from './byte-range.ts';
import { authorizeFileRequest, type FileQuery, fileHttpError, resolveFileUser } from './file-access.ts';
import { announceableLength } from './file-length.ts';
import { EnvdHttpError } from './http-error.ts';

const CHUNK_BYTES = 1024 * 1024;

/** Chooses the response encoding from `Accept-Encoding`: gzip, identity, or none acceptable. */
export function chooseEncoding(header: string | undefined): 'gzip' | 'identity' | undefined {
  if (!header) return 'identity';
  const accepted = new Map<string, number>();
  for (const part of header.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => /^\s*q=([\d.]+)/.exec(p)?.[1]).find(Boolean);
    if (name) accepted.set(name.trim(), q === undefined ? 1 : Number(q));
  }
  const weight = (name: string): number | undefined => accepted.get(name) ?? accepted.get('*');
  if ((weight('gzip') ?? 0) > 0) return 'gzip';
  const identity = accepted.get('identity') ?? accepted.get('*');
  return identity === 0 ? undefined : 'identity';
}

/** True when `If-Modified-Since` says the client's copy is current (HTTP dates have second precision). */
function notModified(request: FastifyRequest, stats: Stats): boolean {
  const header = request.headers['if-modified-since'];
  if (!header || request.headers.range) return false;
  const since = Date.parse(header);
  return !Number.isNaN(since) && Math.floor(stats.mtimeMs / 1000) * 1000 <= since;
}

/** A `Range` only applies while `If-Range` (a date, envd sends no ETag) still matches the file. */
function rangeHeader(request: FastifyRequest, stats: Stats): string | undefined {
  const ifRange = request.headers['if-range'];
  if (Array.isArray(ifRange)) return undefined;
  if (ifRange && Date.parse(ifRange) !== Math.floor(stats.mtimeMs / 1000) * 1000) return undefined;
  return request.headers.range;
}

async function statTarget(ctx: EnvdContext, request: FastifyRequest): Promise<{ path: string; stats: Stats }> {
  const query = request.query as FileQuery;
  const user = resolveFileUser(ctx, query.username);
  let path = query.path ?? '';
  try {
    path = resolvePath(path, user, ctx.state.defaultWorkdir);
  } catch (error) {
    throw new EnvdHttpError(400, (error as Error).message);
  }
  const stats = await fs.stat(path).catch((error: unknown) => {
    throw fileHttpError(error, path);
  });
  if (stats.isDirectory()) throw new EnvdHttpError(400, `path '${path}' is a directory`);
  if (!stats.isFile()) throw new EnvdHttpError(400, `path '${path}' is not a regular file`);
  return { path, stats };
}

const SAMPLE_BYTES = 64 * 1024;

/** Gzips a sample of the file's start: worth compressing only when that saves at least a tenth. */
async function compressesWell(handle: FileHandle, size: number): Promise<boolean> {
  const sample = Buffer.alloc(Math.min(SAMPLE_BYTES, size));
  const { bytesRead } = await handle.read(sample, 0, sample.length, 0);
  if (bytesRead === 0) return false;
  return gzipSync(sample.subarray(0, bytesRead), { level: 1 }).length < bytesRead * 0.9;
}

/**
 * `GET`/`HEAD /files`: streams a file, gzip-compressed when the client accepts it (and the file is
 * not empty), a single byte range when asked for one. Never buffers the file. Files of procfs, sysfs
 * and the like are read to their end whatever size they report.
 */
export async function downloadFile(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  authorizeFileRequest(ctx, request, 'read');
  const { path, stats } = await statTarget(ctx, request);
  const accepted = chooseEncoding(request.headers['accept-encoding']);
  if (!accepted) throw new EnvdHttpError(406, 'no acceptable content encoding (supported: gzip, identity)');
  reply
    .header('content-type', 'application/octet-stream')
    .header('content-disposition', `inline; filename="${encodeURIComponent(basename(path))}"`)
    .header('vary', 'Accept-Encoding')
    .header('accept-ranges', 'bytes')
    .header('last-modified', stats.mtime.toUTCString());
  if (notModified(request, stats)) return reply.code(304).send();

  const handle = await fs.open(path, 'r').catch((error: unknown) => {
    throw fileHttpError(error, path);
  });
  try {
    return await sendOpenFile(ctx, request, reply, { handle, path, stats, accepted });
  } catch (error) {
    // Failed before a stream took the file over (a read error while sampling it, say): nothing else closes it.
    await handle.close().catch(() => undefined);
    throw fileHttpError(error, path);
  }
}

interface OpenFile {
  handle: FileHandle;
  path: string;
  stats: Stats;
  accepted: 'gzip' | 'identity';
}

async function sendOpenFile(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply, { handle, path, stats, accepted }: OpenFile): Promise<FastifyReply> {
  const size = await announceableLength(path, stats, handle);
  if (size === undefined) return sendToEnd(ctx, request, reply, handle, path);

  const range = parseByteRange(rangeHeader(request, stats), size);
  if (range === 'unsatisfiable') {
    await handle.close();
    return reply.code(416).header('content-range', `bytes */${size}`).header('content-type', 'application/json; charset=utf-8')
      .send({ code: 416, message: `range '${request.headers.range}' is outside of the file (${size} bytes)` });
  }
  // Ranges address the file's own bytes, so they are always served without compression; so is
  // content that does not compress (media, archives, random data), where gzip only costs throughput.
  const gzip = accepted === 'gzip' && !range && size > 0 && (await compressesWell(handle, size));
  if (range) reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${size}`);
  if (gzip) reply.header('content-encoding', 'gzip');
  else reply.header('content-length', String(range ? range.end - range.start + 1 : size));
  if (size === 0 || request.method === 'HEAD') {
    await handle.close();
    return reply.send();
  }

  const file = handle.createReadStream({ highWaterMark: CHUNK_BYTES, ...(range ?? {}) });
  if (!gzip) return reply.send(file);
  return reply.send(gzipped(ctx, file, path));
}

/** Compresses a file stream; pipeline ties the stages together, so a client that goes away closes the fd. */
function gzipped(ctx: EnvdContext, file: Readable, path: string): Readable {
  const body = createGzip({ level: 1, chunkSize: 64 * 1024 });
  pipeline(file, body, (error) => {
    if (error && (error as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') ctx.logger.warn({ err: error, path }, 'file download failed');
  });
  return body;
}

/**
 * A file whose length is known only once read (procfs, sysfs): sent whole, read to its end, chunked and
 * without a length. A `Range` is ignored (HTTP allows it), as its end could not be checked beforehand;
 * gzip as the client asks, these files being mostly text.
 */
async function sendToEnd(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply, handle: FileHandle, path: string): Promise<FastifyReply> {
  if (request.method === 'HEAD') {
    await handle.close();
    return reply.send();
  }
  const file = handle.createReadStream({ highWaterMark: CHUNK_BYTES });
  if (chooseEncoding(request.headers['accept-encoding']) !== 'gzip') return reply.send(file);
  reply.header('content-encoding', 'gzip');
  return reply.send(gzipped(ctx, file, path));
}
