import { realpathSync } from 'node:fs';
import { posix } from 'node:path';

/** Resolves symbolic links of a host path as far as the gate can see it (identity when it cannot). */
export type PathResolver = (path: string) => string;

/** No resolution: the lexical check alone (tests, or a gate that does not see the bind roots). */
export const lexicalOnly: PathResolver = (path) => path;

/**
 * Follows symbolic links through the longest prefix of `path` that exists in this process's view of the
 * filesystem and appends the rest: the engine resolves links in a bind source on the host, so a link under
 * an allowed root that points elsewhere (`<root>/x -> /`) is caught when the gate sees the root at the
 * same path (docker-compose.yml mounts it read-only into the gate).
 */
export const followLinks: PathResolver = (path) => {
  let head = path;
  const rest: string[] = [];
  while (head !== '/') {
    try {
      const real = realpathSync(head);
      return rest.length === 0 ? real : posix.join(real, ...rest.reverse());
    } catch {
      rest.push(posix.basename(head));
      head = posix.dirname(head);
    }
  }
  return path;
};

/** True when `path` (absolute, no `..` after normalising) lies in one of `roots` (roots themselves included). */
export function insideRoots(path: string, roots: readonly string[], resolve: PathResolver = lexicalOnly): boolean {
  if (!path.startsWith('/') || path.includes('\0')) return false;
  const normal = posix.normalize(path);
  if (normal.split('/').includes('..')) return false;
  const candidates = [normal, resolve(normal)];
  return candidates.every((candidate) =>
    roots.some((root) => {
      const base = root.endsWith('/') ? root.slice(0, -1) : root;
      return base.length > 0 && (candidate === base || candidate.startsWith(`${base}/`));
    }),
  );
}
