import { createWriteStream, promises as fs, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { chownToUser, makeDirsOwnedBy } from '../filesystem/ownership.ts';
import { stagingPathFor } from '../filesystem/staging-names.ts';
import type { WatchBarrier } from '../filesystem/watch-barrier.ts';
import { replaceMetadata } from '../filesystem/xattr-metadata.ts';
import { PathResolutionError, resolvePath } from '../identity/resolve-path.ts';
import type { SystemUser } from '../identity/system-users.ts';
import { pumpInto } from './body-sink.ts';
import { authorizeFileRequest, type FileQuery, fileHttpError, resolveFileUser } from './file-access.ts';
import { metadataFromHeaders } from './file-metadata-headers.ts';
import { EnvdHttpError } from './http-error.ts';
import { type RestEntry, restFileEntry } from './rest-entry.ts';
import { boundaryOf, MultipartFormatError, type MultipartPart, MultipartReader } from './multipart-reader.ts';

/**
 * A file being received into a temporary sibling, renamed over the target only when complete, so a
 * failed upload leaves nothing behind. Like an in-place truncating write, an overwrite keeps the old
 * file's permission bits and goes through a symlink to the file it points at.
 */
class StagedFile {
  private temp: string | undefined;
  private sink: WriteStream | undefined;
  private destination: string;
  private mode = 0o644;

  constructor(readonly target: string) {
    this.destination = target;
  }

  private async inspectTarget(): Promise<void> {
    const link = await fs.lstat(this.target).catch(() => undefined);
    if (!link) return;
    const existing = link.isSymbolicLink() ? await fs.stat(this.target).catch(() => undefined) : link;
    if (existing?.isDirectory()) throw new EnvdHttpError(400, `path '${this.target}' is a directory`);
    if (!existing?.isFile()) return;
    if (link.isSymbolicLink()) this.destination = await fs.realpath(this.target);
    this.mode = existing.mode & 0o7777;
  }

  async receive(body: Readable, user: SystemUser): Promise<void> {
    await this.inspectTarget();
    await makeDirsOwnedBy(dirname(this.destination), user);
    if (body.errored) throw body.errored;
    this.temp = stagingPathFor(this.destination, 'upload');
    this.sink = createWriteStream(this.temp, { mode: 0o600, highWaterMark: 1024 * 1024 });
    await pumpInto(body, this.sink);
    await chownToUser(this.temp, user);
    await fs.chmod(this.temp, this.mode);
  }

  async commit(metadata: Record<string, string> | undefined): Promise<RestEntry> {
    if (!this.temp) throw new Error(`upload to '${this.target}' was never received`);
    await replaceMetadata(this.temp, metadata ?? {});
    await fs.rename(this.temp, this.destination);
    this.temp = undefined;
    return restFileEntry(this.target, metadata);
  }

  async discard(): Promise<void> {
    // A destroyed write stream may still be opening its file: remove it only once it is closed.
    if (this.sink && !this.sink.closed) await once(this.sink, 'close').catch(() => undefined);
    // ENOTDIR/ELOOP: the staging file could never be created (a parent is a file or a symlink loop).
    if (this.temp) await fs.rm(this.temp, { force: true }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOTDIR' && error.code !== 'ELOOP') throw error;
    });
  }
}

function decodedBody(request: FastifyRequest): Readable {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding === 'identity' || encoding === '') return request.raw;
  if (encoding === 'gzip' || encoding === 'x-gzip') {
    // Not stream.pipeline: a bad gzip body must not destroy the socket the 400 goes out on.
    const gunzip = createGunzip();
    // Bad gzip may fail before the consumer attaches: keep the error on the stream (pumpInto reads
    // `errored`) instead of letting it escape as an unhandled 'error' event.
    gunzip.on('error', () => undefined);
    request.raw.once('error', (error) => gunzip.destroy(error));
    request.raw.once('close', () => {
      if (!request.raw.readableEnded) gunzip.destroy(Object.assign(new Error('the request body ended early (client went away)'), { code: 'ECONNRESET' }));
    });
    return request.raw.pipe(gunzip);
  }
  throw new EnvdHttpError(400, `unsupported content encoding '${encoding}' (supported: gzip)`);
}

function resolveTarget(path: string, user: SystemUser, ctx: EnvdContext): string {
  try {
    return resolvePath(path, user, ctx.state.defaultWorkdir);
  } catch (error) {
    if (error instanceof PathResolutionError) throw new EnvdHttpError(400, error.message);
    throw error;
  }
}

/**
 * Receives every part named `file` of a multipart body, in order, each into its own staged file. A
 * part may be a file (with a filename) or a plain form field (without one): both carry the content.
 */
async function receiveMultipart(request: FastifyRequest, body: Readable, targetOf: (filename: string | undefined) => string, user: SystemUser): Promise<StagedFile[]> {
  const staged: StagedFile[] = [];
  const seen = new Set<string>();
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown;
  const onPart = ({ name, filename, body: content }: MultipartPart): void => {
    // A truncated or malformed body fails the part stream too; the parser's error reports it.
    content.on('error', () => undefined);
    if (name !== 'file' || failure) {
      content.resume();
      return;
    }
    let file: StagedFile;
    try {
      const target = targetOf(filename);
      if (seen.has(target)) throw new EnvdHttpError(400, `two parts of the upload write to '${target}'`);
      seen.add(target);
      file = new StagedFile(target);
      staged.push(file);
    } catch (error) {
      failure = error;
      content.resume();
      return;
    }
    // Parts arrive one after another; each is written while it streams in.
    chain = chain.then(() => file.receive(content, user)).catch((error: unknown) => {
      failure ??= error;
      content.resume();
    });
  };
  try {
    await pumpInto(body, new MultipartReader(boundaryOf(request.headers['content-type'] ?? ''), onPart));
    await chain;
  } catch (error) {
    failure ??= error;
  }
  if (failure) {
    // Let the part being written settle first, so its temporary file exists before it is removed.
    await chain;
    await Promise.all(staged.map((file) => file.discard()));
    if (failure instanceof MultipartFormatError) throw new EnvdHttpError(400, `malformed multipart body: ${failure.message}`);
    throw failure;
  }
  return staged;
}

/** `POST /files`: multipart (one or many files) or a raw octet-stream body; gzip bodies accepted. */
export async function uploadFiles(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply, watches: WatchBarrier): Promise<FastifyReply> {
  authorizeFileRequest(ctx, request, 'write');
  const query = request.query as FileQuery;
  const user = resolveFileUser(ctx, query.username);
  const metadata = metadataFromHeaders(request.headers);
  const contentType = (request.headers['content-type'] ?? '').toLowerCase();
  let staged: StagedFile[] = [];
  try {
    if (contentType.startsWith('multipart/form-data')) {
      const body = decodedBody(request);
      staged = await receiveMultipart(request, body, (filename) => {
        const path = query.path || filename;
        if (!path) throw new EnvdHttpError(400, 'a file part without a filename needs the path query parameter');
        return resolveTarget(path, user, ctx);
      }, user);
      if (staged.length === 0) throw new EnvdHttpError(400, 'no file part in the multipart upload');
    } else if (contentType.startsWith('application/octet-stream')) {
      if (!query.path) throw new EnvdHttpError(400, 'an octet-stream upload needs the path query parameter');
      const file = new StagedFile(resolveTarget(query.path, user, ctx));
      staged = [file];
      await file.receive(decodedBody(request), user);
    } else {
      throw new EnvdHttpError(400, `unsupported content type '${contentType}' (use multipart/form-data or application/octet-stream)`);
    }
    const written: RestEntry[] = [];
    for (const file of staged) written.push(await file.commit(metadata));
    await watches.settle();
    return reply.send(written);
  } catch (error) {
    await Promise.all(staged.map((file) => file.discard()));
    if (!request.raw.readableEnded) request.raw.resume();
    throw fileHttpError(error, query.path ?? '');
  }
}
