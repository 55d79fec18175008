/** Paths inside the build container: following links, finding what is missing, making directories. */
import { posix } from 'node:path';
import type { PathStat } from '../../runtime/image-engine.ts';
import type { BuildWorkspace } from './build-workspace.ts';

const MAX_LINKS = 16;

/** Stat that follows symbolic links (at most a few). */
export async function statFollowing(workspace: BuildWorkspace, path: string): Promise<PathStat> {
  let current = path;
  for (let i = 0; i < MAX_LINKS; i++) {
    const stat = await workspace.stat(current);
    if (!stat.linkTarget) return stat;
    current = posix.resolve(posix.dirname(current), stat.linkTarget);
  }
  return { exists: false, isDirectory: false };
}

export class NotADirectoryError extends Error {}

/** The components of an absolute directory path that do not exist yet, outermost first. */
export async function missingDirectories(workspace: BuildWorkspace, dir: string): Promise<string[]> {
  const missing: string[] = [];
  for (let current = posix.normalize(dir); current !== '/'; current = posix.dirname(current)) {
    const stat = await statFollowing(workspace, current);
    if (stat.exists) {
      if (!stat.isDirectory) throw new NotADirectoryError(`'${current}' exists in the image and is not a directory`);
      break;
    }
    missing.unshift(current);
  }
  return missing;
}

/** A path of a step made absolute against the current WORKDIR; a trailing `/` is kept. */
export function absoluteIn(workdir: string | null, path: string): string {
  const resolved = posix.resolve(workdir ?? '/', path);
  return path.endsWith('/') && resolved !== '/' ? `${resolved}/` : resolved;
}
