/**
 * Which host paths may be bound into a container: a volume directory the platform made, `<root>/vol_<id>`, directly
 * under a volumes root, and nothing else. Written once for the docker gate (compose) and the node agents (cluster),
 * which both stand between the API and an engine. The engine follows symbolic links in a bind source on the host,
 * so nothing below the root may be a link, whatever it points to (a link whose target the checker cannot see, such
 * as `/root/.ssh`, included): each component is read with lstat and must be a real directory; a path the checker
 * cannot see is refused. The source must be written plainly (absolute, normalised, no `.`/`..`, no trailing slash).
 */
import { lstatSync, statSync } from 'node:fs';
import { posix } from 'node:path';

/** The name of a volume directory as the platform makes it (the volume id), directly under a volumes root. */
export const VOLUME_DIR_NAME = /^vol_[a-z0-9]{20}$/;

export interface VolumeBindCheck {
  /** Who checks, for the messages (`the docker gate`, `this node`). */
  viewer: string;
  /** Where the checker sees a root the engine names `root` (default: at the same path). */
  localPath?(root: string): string;
  /** Added to the message when the checker cannot see a root (how to let it). */
  unseenHint?: string;
}

function rootOf(source: string, roots: readonly string[]): string | undefined {
  return roots.find((root) => root.length > 1 && source.startsWith(`${root}/`));
}

/** Why the host path `source` is not a volume directory under one of `roots` (as the engine names them); undefined when it is. */
export function volumeBindProblem(source: string, roots: readonly string[], check: VolumeBindCheck): string | undefined {
  if (!source.startsWith('/') || source.includes('\0') || posix.normalize(source) !== source || source.endsWith('/')) {
    return `host path ${JSON.stringify(source.slice(0, 300))} is not a plain absolute path (normalised, no '.' or '..')`;
  }
  const root = rootOf(source, roots);
  if (root === undefined) return `host path ${source} is outside the allowed bind roots (${roots.join(', ') || 'none'})`;
  const local = check.localPath?.(root) ?? root;
  try {
    if (!statSync(local).isDirectory()) return `the bind root ${root} is not a directory`;
  } catch {
    return `${check.viewer} cannot see the bind root ${root}${check.unseenHint ? ` (${check.unseenHint})` : ''}`;
  }
  let walked = root;
  let walkedLocal = local;
  for (const component of source.slice(root.length + 1).split('/')) {
    walked = `${walked}/${component}`;
    walkedLocal = `${walkedLocal}/${component}`;
    let entry;
    try {
      entry = lstatSync(walkedLocal);
    } catch {
      return `host path ${source}: ${walked} does not exist as ${check.viewer} sees the bind root`;
    }
    if (entry.isSymbolicLink()) return `host path ${source}: ${walked} is a symbolic link (the engine would follow it on the host)`;
    if (!entry.isDirectory()) return `host path ${source}: ${walked} is not a directory`;
  }
  if (!VOLUME_DIR_NAME.test(source.slice(root.length + 1))) return `host path ${source} is not a volume directory (${root}/vol_<id>)`;
  return undefined;
}
