import { lstatSync, realpathSync, statSync } from 'node:fs';
import { posix } from 'node:path';

/**
 * The name of a volume directory as the platform makes it (apps/api/src/volumes/volume-storage.ts, VOLUME_DIR:
 * the volume id), directly under the volumes root. No other host path is ever bound into a container.
 */
export const VOLUME_DIR_NAME = /^vol_[a-z0-9]{20}$/;

/**
 * The real path of a configured bind root when this process can see it (undefined when it cannot): the
 * operator's own links in the root's path are followed once, at startup, so a bind source may name the root
 * either way.
 */
export function realRoot(root: string): string | undefined {
  try {
    return realpathSync(root);
  } catch {
    return undefined;
  }
}

function rootOf(source: string, roots: readonly string[]): string | undefined {
  return roots.find((root) => root.length > 1 && source.startsWith(`${root}/`));
}

/**
 * Why the host path `source` is not a volume directory the platform made under one of `roots`; undefined when
 * it is. The engine follows symbolic links in a bind source on the host, so nothing below the root may be a
 * link, whatever it points to (a link whose target the gate cannot see, such as `/root/.ssh`, included): each
 * component is read with lstat, as the gate sees the root (docker-compose.yml mounts it read-only at the same
 * path), and must be a real directory; a path the gate cannot see is refused. The source must be written
 * plainly (absolute, normalised, no `.`/`..`, no trailing slash) and be exactly `<root>/vol_<id>`.
 */
export function bindSourceProblem(source: string, roots: readonly string[]): string | undefined {
  if (!source.startsWith('/') || source.includes('\0') || posix.normalize(source) !== source || source.endsWith('/')) {
    return `host path ${JSON.stringify(source.slice(0, 300))} is not a plain absolute path (normalised, no '.' or '..')`;
  }
  const root = rootOf(source, roots);
  if (root === undefined) return `host path ${source} is outside the allowed bind roots (${roots.join(', ') || 'none'})`;
  try {
    if (!statSync(root).isDirectory()) return `the bind root ${root} is not a directory`;
  } catch {
    return `the docker gate cannot see the bind root ${root} (mount it into the gate at the same path)`;
  }
  let walked = root;
  for (const component of source.slice(root.length + 1).split('/')) {
    walked = `${walked}/${component}`;
    let entry;
    try {
      entry = lstatSync(walked);
    } catch {
      return `host path ${source}: ${walked} does not exist as the docker gate sees the bind root`;
    }
    if (entry.isSymbolicLink()) return `host path ${source}: ${walked} is a symbolic link (the engine would follow it on the host)`;
    if (!entry.isDirectory()) return `host path ${source}: ${walked} is not a directory`;
  }
  const relative = source.slice(root.length + 1);
  if (!VOLUME_DIR_NAME.test(relative)) return `host path ${source} is not a volume directory (${root}/vol_<id>)`;
  return undefined;
}
