import { promises as fs } from 'node:fs';
import { basename } from 'node:path';
import { createGzip } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { resolvePath } from '../identity/resolve-path.ts';
import { authorizeFileRequest, type FileQuery, fileHttpError, resolveFileUser } from './file-access.ts';
import { EnvdHttpError } from './http-error.ts';

/** Chooses the response encoding from `Accept-Encoding`: gzip, identity, or none acceptable. */
export function chooseEncoding(header: string | undefined): 'gzip' | 'identity' | undefined {
  if (!header) return 'identity';
  const accepted = new Map<string, number>();
  for (const part of header.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => /^\s*q=([\d.]+)/.exec(p)?.[1]).find(Boolean);
    if (name) accepted.set(name, q === undefined ? 1 : Number(q));
  }
  const weight = (name: string): number | undefined => accepted.get(name) ?? accepted.get('*');
  if ((weight('gzip') ?? 0) > 0) return 'gzip';
  const identity = accepted.get('identity') ?? accepted.get('*');
  return identity === 0 ? undefined : 'identity';
}

/** `GET /files`: streams a file, gzip-compressed when the client accepts it. */
export async function downloadFile(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  authorizeFileRequest(ctx, request, 'read');
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
  const encoding = chooseEncoding(request.headers['accept-encoding']);
  if (!encoding) throw new EnvdHttpError(406, 'no acceptable content encoding (supported: gzip, identity)');
  const handle = await fs.open(path, 'r').catch((error: unknown) => {
    throw fileHttpError(error, path);
  });
  reply
    .header('content-type', 'application/octet-stream')
    .header('content-disposition', `inline; filename="${encodeURIComponent(basename(path))}"`)
    .header('vary', 'Accept-Encoding')
    .header('last-modified', stats.mtime.toUTCString());
  const stream = handle.createReadStream({ highWaterMark: 1024 * 1024 });
  if (encoding === 'gzip') {
    reply.header('content-encoding', 'gzip');
    return reply.send(stream.pipe(createGzip({ level: 1 })));
  }
  reply.header('content-length', String(stats.size));
  return reply.send(stream);
}
