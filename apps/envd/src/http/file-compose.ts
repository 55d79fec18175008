import { constants, createReadStream, createWriteStream, promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import { chownToUser, makeDirsOwnedBy } from '../filesystem/ownership.ts';
import { stagingPathFor } from '../filesystem/staging-names.ts';
import type { WatchBarrier } from '../filesystem/watch-barrier.ts';
import { resolvePath } from '../identity/resolve-path.ts';
import { fileHttpError, resolveFileUser } from './file-access.ts';
import { EnvdHttpError } from './http-error.ts';
import { restFileEntry } from './rest-entry.ts';

interface ComposeBody {
  source_paths?: unknown;
  destination?: unknown;
  username?: unknown;
}

function parseComposeBody(raw: unknown): { sources: string[]; destination: string; username: string | undefined } {
  const body = (raw ?? {}) as ComposeBody;
  if (!Array.isArray(body.source_paths) || body.source_paths.length === 0 || !body.source_paths.every((p) => typeof p === 'string' && p !== '')) {
    throw new EnvdHttpError(400, 'source_paths must be a non-empty array of paths');
  }
  if (typeof body.destination !== 'string' || body.destination === '') throw new EnvdHttpError(400, 'destination is required');
  if (body.username !== undefined && typeof body.username !== 'string') throw new EnvdHttpError(400, 'username must be a string');
  return { sources: body.source_paths as string[], destination: body.destination, username: body.username };
}

/**
 * `POST /files/compose`: concatenates the sources in order into the destination. The first source is
 * cloned (reflink / copy_file_range where the filesystem allows it), the rest appended; the result
 * replaces the destination atomically and the sources are deleted only after that succeeded.
 */
export async function composeFiles(ctx: EnvdContext, request: FastifyRequest, reply: FastifyReply, watches: WatchBarrier): Promise<FastifyReply> {
  const { sources: rawSources, destination: rawDestination, username } = parseComposeBody(request.body);
  const user = resolveFileUser(ctx, username);
  const resolve = (path: string): string => {
    try {
      return resolvePath(path, user, ctx.state.defaultWorkdir);
    } catch (error) {
      throw new EnvdHttpError(400, (error as Error).message);
    }
  };
  const destination = resolve(rawDestination);
  const sources = rawSources.map(resolve);
  for (const source of sources) {
    if (source === destination) throw new EnvdHttpError(400, `source '${source}' is the destination`);
    const stats = await fs.stat(source).catch((error: unknown) => {
      throw fileHttpError(error, source);
    });
    if (!stats.isFile()) throw new EnvdHttpError(400, `source '${source}' is not a regular file`);
  }
  const temp = stagingPathFor(destination, 'compose');
  try {
    await makeDirsOwnedBy(dirname(destination), user);
    await fs.copyFile(sources[0], temp, constants.COPYFILE_FICLONE);
    for (const source of sources.slice(1)) {
      await pipeline(createReadStream(source, { highWaterMark: 1024 * 1024 }), createWriteStream(temp, { flags: 'a' }));
    }
    await chownToUser(temp, user);
    await fs.rename(temp, destination);
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw fileHttpError(error, destination);
  }
  for (const source of new Set(sources)) await fs.rm(source, { force: true });
  await watches.settle();
  // The interface's "Composed file result" ({path, name, type}), shaped like the entries of POST /files;
  // built from what was just renamed into place, not from a second look a sandbox process could race.
  return reply.send(restFileEntry(destination));
}
