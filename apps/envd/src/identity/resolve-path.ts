import { posix } from 'node:path';
import type { SystemUser } from './system-users.ts';

export class PathResolutionError extends Error {}

/**
 * Resolves a client path the way the reference agent does: empty → default workdir (or home),
 * `~` and `~/x` → the user's home, absolute → as is, relative → joined onto the user's home.
 */
export function resolvePath(path: string, user: SystemUser, defaultWorkdir?: string): string {
  if (path.includes('\0')) throw new PathResolutionError(`invalid path: contains a NUL byte: ${JSON.stringify(path)}`);
  if (path === '') return posix.normalize(defaultWorkdir || user.home);
  if (path === '~') return posix.normalize(user.home);
  if (path.startsWith('~/')) return posix.join(user.home, path.slice(2));
  if (path.startsWith('~')) throw new PathResolutionError(`cannot expand user-specific home dir: ${path}`);
  if (posix.isAbsolute(path)) return posix.normalize(path);
  return posix.join(user.home, path);
}
