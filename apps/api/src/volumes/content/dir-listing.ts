import { promises as fsp } from 'node:fs';
import { badRequest, pathNotFound } from './content-errors.ts';
import { toEntryStat, type VolumeEntryStat } from './entry-stat.ts';
import { childPath, isVolumeRoot, type VolumePath, baseName } from './volume-path.ts';
import { type DirHandle, errnoOf, lstatAt, notADirectory, openChildDir, openParent } from './volume-tree.ts';

/** Most entries one listing answers (a deep `depth` over a large tree is refused, not streamed forever). */
export const MAX_LISTED_ENTRIES = 100_000;

/**
 * `GET …/dir`: the entries of a directory, and with `depth` n > 1 those of its subdirectories down to
 * n levels, as one flat array (each entry's `path` says where it is). Links are listed as links and
 * never descended into. Entries that vanish while listing are skipped.
 */
export async function listDirectory(root: DirHandle, path: VolumePath, depth: number): Promise<VolumeEntryStat[]> {
  const entries: VolumeEntryStat[] = [];
  if (isVolumeRoot(path)) {
    await collect(root, depth, entries);
    return entries;
  }
  const parent = await openParent(root, path.segments, { notDirectory: notADirectory });
  try {
    const dir = await openChildDir(parent, baseName(path), notADirectory);
    if (!dir) throw pathNotFound(path.display);
    try {
      await collect(dir, depth, entries);
    } finally {
      await dir.close();
    }
  } finally {
    if (parent !== root) await parent.close();
  }
  return entries;
}

async function collect(dir: DirHandle, depth: number, into: VolumeEntryStat[]): Promise<void> {
  const names = (await fsp.readdir(dir.self)).sort();
  for (const name of names) {
    const stats = await lstatAt(dir, name);
    if (!stats) continue;
    if (into.length >= MAX_LISTED_ENTRIES) {
      throw badRequest(`the listing has more than ${MAX_LISTED_ENTRIES} entries; list with a smaller depth or a deeper path`);
    }
    const path = childPath(dir.path, name);
    const target = stats.isSymbolicLink() ? await fsp.readlink(dir.at(name)).catch(() => undefined) : undefined;
    into.push(toEntryStat(stats, name, path.display, target));
    if (depth > 1 && stats.isDirectory()) {
      let child: DirHandle | undefined;
      try {
        child = await openChildDir(dir, name, notADirectory);
      } catch (error) {
        // Replaced by a link or a file since the lstat: listed as it was, not descended into.
        if (errnoOf(error) === undefined) continue;
        throw error;
      }
      if (!child) continue;
      try {
        await collect(child, depth - 1, into);
      } finally {
        await child.close();
      }
    }
  }
}
