import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { EnvdContext } from '../context.ts';
import type { SystemUser } from '../identity/system-users.ts';
import { tokensEqual, UNAUTHORIZED_MESSAGE } from './access-token-guard.ts';
import { EnvdHttpError } from './http-error.ts';

export type FileOperation = 'read' | 'write';

export interface FileQuery {
  path?: string;
  username?: string;
  signature?: string;
  signature_expiration?: string;
}

/** `v1_` + unpadded standard base64 of sha256(path:operation:username:token[:expiration]). */
export function fileSignature(path: string, operation: FileOperation, username: string, token: string, expiration?: string): string {
  const raw = [path, operation, username, token, ...(expiration === undefined ? [] : [expiration])].join(':');
  return `v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`;
}

/** `/files` takes the access token header or, failing that, a (possibly expiring) signature. */
export function authorizeFileRequest(ctx: EnvdContext, request: FastifyRequest, operation: FileOperation): void {
  const token = ctx.state.accessToken;
  if (!token) return;
  const header = request.headers['x-access-token'];
  if (typeof header === 'string' && header !== '') {
    if (tokensEqual(header, token)) return;
    throw new EnvdHttpError(401, UNAUTHORIZED_MESSAGE);
  }
  const query = request.query as FileQuery;
  if (!query.signature) throw new EnvdHttpError(401, 'missing signature query parameter');
  const expected = fileSignature(query.path ?? '', operation, query.username ?? '', token, query.signature_expiration);
  if (!tokensEqual(query.signature, expected)) throw new EnvdHttpError(401, 'invalid signature');
  if (query.signature_expiration !== undefined) {
    const expiration = Number(query.signature_expiration);
    if (!Number.isFinite(expiration) || expiration < Math.floor(Date.now() / 1000)) throw new EnvdHttpError(401, 'signature is already expired');
  }
}

/** The user of a `/files` call: the `username` query parameter, else the default user. */
export function resolveFileUser(ctx: EnvdContext, username: string | undefined): SystemUser {
  const name = username || ctx.state.defaultUser;
  const user = ctx.users.lookup(name);
  if (!user) throw new EnvdHttpError(401, `error looking up user '${name}'`);
  return user;
}

/** Maps a filesystem failure during a `/files` call to its HTTP status. */
export function fileHttpError(error: unknown, path: string): EnvdHttpError {
  if (error instanceof EnvdHttpError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  switch (code) {
    case 'ENOENT':
      return new EnvdHttpError(404, `path '${path}' does not exist`);
    case 'EISDIR':
      return new EnvdHttpError(400, `path '${path}' is a directory`);
    case 'ENOTDIR':
    case 'EINVAL':
    case 'ENAMETOOLONG':
      return new EnvdHttpError(400, `invalid path '${path}': ${message}`);
    case 'ELOOP':
      return new EnvdHttpError(400, `too many levels of symbolic links: '${path}'`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new EnvdHttpError(507, 'not enough disk space available');
    case 'EACCES':
    case 'EPERM':
      return new EnvdHttpError(403, `permission denied for '${path}'`);
    case 'Z_DATA_ERROR':
    case 'Z_BUF_ERROR':
      return new EnvdHttpError(400, `request body is not valid gzip: ${message}`);
    default:
      return new EnvdHttpError(500, `error handling '${path}': ${message}`);
  }
}
