import { promises as fsp } from 'node:fs';
import { badRequest, pathConflict, pathNotFound } from './content-errors.ts';
import { baseName, childPath, isVolumeRoot, type VolumePath } from './volume-path.ts';
import { type DirHandle, errnoOf, lstatAt, notADirectory, openChildDir, openParent } from './volume-tree.ts';

/** Deepest directory nesting a removal descends (one open descriptor per level). */
export const MAX_REMOVAL_DEPTH = 512;

/**
 * `DELETE …/path`: removes a file, a link (never its target) or a directory with everything in it.
 * Every step is relative to a directory descriptor opened without following links, so a link swapped
 * in mid-removal is unlinked like any file instead of being descended through. The volume root itself
 * cannot be removed (400).
 */
export async function removeEntry(root: DirHandle, path: VolumePath): Promise<void> {
  if (isVolumeRoot(path)) throw badRequest('the volume root cannot be removed (delete the volume instead)');
  const parent = await openParent(root, path.segments, { notDirectory: notADirectory });
  try {
    const name = baseName(path);
    const stats = await lstatAt(parent, name);
    if (!stats) throw pathNotFound(path.display);
    await removeIn(parent, name, stats.isDirectory(), 0);
  } finally {
    if (parent !== root) await parent.close();
  }
}

async function removeIn(dir: DirHandle, name: string, isDirectory: boolean, level: number): Promise<void> {
  if (!isDirectory) {
    await unlinkQuietly(dir, name, level);
    return;
  }
  if (level >= MAX_REMOVAL_DEPTH) throw pathConflict(`"${childPath(dir.path, name).display}" is nested more than ${MAX_REMOVAL_DEPTH} directories deep; remove it in parts`);
  let child: DirHandle | undefined;
  try {
    child = await openChildDir(dir, name, notADirectory);
  } catch (error) {
    // No longer a directory (a link or file was swapped in): remove that instead.
    if (errnoOf(error) !== undefined) throw error;
    await fsp.unlink(dir.at(name)).catch(() => undefined);
    return;
  }
  if (!child) return;
  try {
    // Entries added concurrently make rmdir fail with ENOTEMPTY: empty it again a few times.
    for (let attempt = 0; ; attempt += 1) {
      for (const entry of await fsp.readdir(child.self, { withFileTypes: true })) {
        await removeIn(child, entry.name, entry.isDirectory(), level + 1);
      }
      try {
        await fsp.rmdir(dir.at(name));
        return;
      } catch (error) {
        const code = errnoOf(error);
        if (code === 'ENOENT') return;
        if (code !== 'ENOTEMPTY' || attempt >= 3) throw error;
      }
    }
  } finally {
    await child.close();
  }
}

async function unlinkQuietly(dir: DirHandle, name: string, level: number): Promise<void> {
  try {
    await fsp.unlink(dir.at(name));
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT') return;
    // Became a directory in the meantime.
    if (code === 'EISDIR' || code === 'EPERM') {
      await removeIn(dir, name, true, level + 1);
      return;
    }
    throw error;
  }
}
