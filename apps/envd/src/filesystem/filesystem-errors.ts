import { Code, ConnectError } from '@connectrpc/connect';
import { PathResolutionError } from '../identity/resolve-path.ts';

/** Maps a filesystem failure to the Connect code the reference agent uses. */
export function toConnectError(error: unknown, path: string): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof PathResolutionError) return new ConnectError(error.message, Code.InvalidArgument);
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  switch (code) {
    case 'ENOENT':
      return new ConnectError(`file not found: ${path}`, Code.NotFound);
    case 'ENOTDIR':
    case 'EISDIR':
    case 'EINVAL':
    case 'ENAMETOOLONG':
      return new ConnectError(`invalid path '${path}': ${message}`, Code.InvalidArgument);
    case 'ELOOP':
      return new ConnectError(`too many levels of symbolic links: ${path}`, Code.FailedPrecondition);
    default:
      return new ConnectError(`error on '${path}': ${message}`, Code.Internal);
  }
}
