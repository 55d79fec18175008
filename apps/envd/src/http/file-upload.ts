import Busboy from 'busboy';
import { randomBytes } from 'node:crypto';
import { createWriteStream, promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { chownToUser, makeDirsOwnedBy } from '../filesystem/ownership.ts';
import { replaceMetadata } from '../filesystem/xattr-metadata.ts';
import { PathResolutionError, resolvePath } from '../identity/resolve-path.ts';
import type { SystemUser } from '../identity/system-users.ts';
import { authorizeFileRequest, type FileQuery, fileHttpError, resolveFileUser } from './file-access.ts';
import { metadataFromHeaders } from './file-metadata-headers.ts';
import { EnvdHttpError } from './http-error.ts';

interface WrittenFile {
  path: string;
  name: string;
  type: 'file';
  metadata?: Record<string, string>;
}

/** A file being received into a temporary sibling, renamed over the target only when complete. */
class StagedFile {
  readonly temp: string;

  constructor(readonly target: string) {
    this.temp = join(dirname(target), `.${basename(target)}.upload-${randomBytes(6).toString('hex')}`);
  }

  async receive(body: Readable, user: SystemUser): Promise<void> {
    const existing = await fs.stat(this.target).catch(() => undefined);
    if (existing?.isDirectory()) throw new EnvdHttpError(400, `path '${this.target}' is a directory`);
    await makeDirsOwnedBy(dirname(this.target), user);
    await pipeline(body, createWriteStream(this.temp, { mode: 0o644, highWaterMark: 1024 * 1024 }));
    await chownToUser(this.temp, user);
  }

  async commit(metadata: Record<string, string> | undefined): Promise<WrittenFile> {
    await replaceMetadata(this.temp, metadata ?? {});
    await fs.rename(this.temp, this.target);
    return { path: this.target, name: basename(this.target), type: 'file', ...(metadata ? { metadata } : {}) };
  }

  async discard(): Promise<void> {
    await fs.rm(this.temp, { force: true });
  }
}

function decodedBody(request: FastifyRequest): Readable {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding === 'identity' || encoding === '') return request.raw;
  if (encoding === 'gzip' || encoding === 'x-gzip') return request.raw.pipe(createGunzip());
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

/** Receives every `file` part of a multipart body, in order, each into its own staged file. */
async function receiveMultipart(request: FastifyRequest, body: Readable, targetOf: (filename: string) => string, user: SystemUser): Promise<StagedFile[]> {
  const staged: StagedFile[] = [];
  const seen = new Set<string>();
  const parser = Busboy({ headers: request.headers, preservePath: true });
  let chain: Promise<void> = Promise.resolve();
  let failure: unknown;
  parser.on('file', (field, stream, info) => {
    if (field !== 'file' || failure) {
      stream.resume();
      return;
    }
    let file: StagedFile;
    try {
      const target = targetOf(info.filename ?? "");
      if (seen.has(target)) throw new EnvdHttpError(400, `two parts of the upload write to '${target}'`);
      seen.add(target);
      file = new StagedFile(target);
      staged.push(file);
    } catch (error) {
      failure = error;
      stream.resume();
      return;
    }
    // Parts arrive one after another; each is written while it streams in.
    chain = chain.then(() => file.receive(stream, user)).catch((error: unknown) => {
      failure ??= error;
      stream.resume();
    });
  });
  try {
    await pipeline(body, parser);
    await chain;
  } catch (error) {
    failure ??= error;
  }
  if (failure) {
    await Promise.all(staged.map((file) => file.discard()));
    throw failure;
  }
  return staged;
}

/** `POST /files`: multipart (one or many files) or a raw octet-stream body; gzip bodies accepted. */
export async function uploadFiles(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  authorizeFileRequest(ctx, request, 'write');
  const query = request.query as FileQuery;
  const user = resolveFileUser(ctx, query.username);
  const metadata = metadataFromHeaders(request.headers);
  const contentType = (request.headers['content-type'] ?? '').toLowerCase();
  let staged: StagedFile[] = [];
  try {
    if (contentType.startsWith('multipart/form-data')) {
      const body = decodedBody(request);
      staged = await receiveMultipart(request, body, (filename) => resolveTarget(query.path || filename, user, ctx), user);
      if (staged.length === 0) throw new EnvdHttpError(400, 'no file part in the multipart upload');
    } else if (contentType.startsWith('application/octet-stream')) {
      if (!query.path) throw new EnvdHttpError(400, 'an octet-stream upload needs the path query parameter');
      const file = new StagedFile(resolveTarget(query.path, user, ctx));
      staged = [file];
      await file.receive(decodedBody(request), user);
    } else {
      throw new EnvdHttpError(400, `unsupported content type '${contentType}' (use multipart/form-data or application/octet-stream)`);
    }
    const written: WrittenFile[] = [];
    for (const file of staged) written.push(await file.commit(metadata));
    return reply.send(written);
  } catch (error) {
    await Promise.all(staged.map((file) => file.discard()));
    if (!request.raw.readableEnded) request.raw.resume();
    throw fileHttpError(error, query.path ?? '');
  }
}
