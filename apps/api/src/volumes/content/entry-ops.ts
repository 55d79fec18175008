import { promises as fsp } from 'node:fs';
import { badRequest, pathConflict, pathNotFound } from './content-errors.ts';
import type { Ownership, WriteOptions } from './entry-options.ts';
import { DEFAULT_DIR_MODE, type OwnerPolicy } from './entry-owner.ts';
import { toEntryStat, type VolumeEntryStat } from './entry-stat.ts';
import { baseName, isVolumeRoot, type VolumePath } from './volume-path.ts';
import { type DirHandle, lstatAt, notADirectory, openChildDir, openParent, parentNotADirectory, pinEntry, procPath } from './volume-tree.ts';

/** The entry's stat as the API shows it; a link's target is read, never followed. */
export async function statEntry(root: DirHandle, path: VolumePath): Promise<VolumeEntryStat> {
  if (isVolumeRoot(path)) return toEntryStat(await root.handle.stat(), '', '/');
  const parent = await openParent(root, path.segments, { notDirectory: notADirectory });
  try {
    return await statIn(parent, baseName(path), path);
  } finally {
    if (parent !== root) await parent.close();
  }
}

export async function statIn(dir: DirHandle, name: string, path: VolumePath): Promise<VolumeEntryStat> {
  const stats = await lstatAt(dir, name);
  if (!stats) throw pathNotFound(path.display);
  const target = stats.isSymbolicLink() ? await fsp.readlink(dir.at(name)).catch(() => undefined) : undefined;
  return toEntryStat(stats, name, path.display, target);
}

/**
 * `POST …/dir`: creates the directory (201). Without `force` the parent must exist and the path must
 * be free (409 otherwise); with `force` missing parents are created (with the same owner, mode 0755)
 * and an existing directory is answered as it is.
 */
export async function makeDirectory(root: DirHandle, path: VolumePath, options: WriteOptions, owners: OwnerPolicy): Promise<VolumeEntryStat> {
  if (isVolumeRoot(path)) {
    if (options.force) return statEntry(root, path);
    throw pathConflict('path "/" already exists (it is the volume root)');
  }
  const parentOwner: Ownership = { uid: options.uid, gid: options.gid };
  const parent = await openParent(root, path.segments, {
    notDirectory: parentNotADirectory,
    create: options.force ? (dir) => owners.applyToNew(procPath(dir.handle), parentOwner, DEFAULT_DIR_MODE) : undefined,
  });
  const name = baseName(path);
  try {
    try {
      await fsp.mkdir(parent.at(name), 0o700);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const existing = await lstatAt(parent, name);
      if (options.force && existing?.isDirectory()) return await statIn(parent, name, path);
      throw pathConflict(`path "${path.display}" already exists${existing?.isDirectory() ? ' (pass force to accept an existing directory)' : ' and is not a directory'}`);
    }
    const created = await openChildDir(parent, name, parentNotADirectory);
    if (!created) throw pathNotFound(path.display);
    try {
      await owners.applyToNew(created.handle, options, DEFAULT_DIR_MODE);
      return toEntryStat(await created.handle.stat(), name, path.display);
    } finally {
      await created.close();
    }
  } finally {
    if (parent !== root) await parent.close();
  }
}

/**
 * `PATCH …/path`: chown/chmod of the entry itself. Files and directories are changed through a
 * descriptor pinned with `O_PATH | O_NOFOLLOW`; a link's owner is changed with lchown, and a link has
 * no mode of its own (400).
 */
export async function updateMetadata(root: DirHandle, path: VolumePath, wanted: Ownership): Promise<VolumeEntryStat> {
  if (isVolumeRoot(path)) {
    await applyOwnership(procPath(root.handle), wanted, false);
    return statEntry(root, path);
  }
  const parent = await openParent(root, path.segments, { notDirectory: notADirectory });
  const name = baseName(path);
  try {
    const pinned = await pinEntry(parent, name);
    if (!pinned) throw pathNotFound(path.display);
    try {
      if (pinned.stats.isSymbolicLink()) {
        if (wanted.mode !== undefined) throw badRequest(`"${path.display}" is a symbolic link, which has no mode of its own`);
        await applyOwnership(parent.at(name), wanted, true);
        return await statIn(parent, name, path);
      }
      await applyOwnership(procPath(pinned.handle), wanted, false);
      return toEntryStat(await pinned.handle.stat(), name, path.display);
    } finally {
      await pinned.handle.close().catch(() => undefined);
    }
  } finally {
    if (parent !== root) await parent.close();
  }
}

async function applyOwnership(target: string, wanted: Ownership, link: boolean): Promise<void> {
  if (wanted.uid !== undefined || wanted.gid !== undefined) {
    // -1 leaves that id unchanged.
    const uid = wanted.uid ?? -1;
    const gid = wanted.gid ?? -1;
    if (link) await fsp.lchown(target, uid, gid);
    else await fsp.chown(target, uid, gid);
  }
  if (wanted.mode !== undefined) await fsp.chmod(target, wanted.mode);
}
