import { constants, promises as fsp, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { ContentError, forbidden, pathConflict, pathNotFound } from './content-errors.ts';
import { type VolumePath, volumePathOf } from './volume-path.ts';

/**
 * Race-free access to one volume's directory tree, for a caller (the platform, as root) that must never
 * be steered outside it by the volume's content, which sandboxes change concurrently.
 *
 * Node has no openat(2), so every step is anchored on a directory descriptor through
 * `/proc/self/fd/<fd>/<name>`: the kernel resolves the magic link to the directory that descriptor
 * holds open (wherever it has moved since), then looks up `<name>` alone. Each step opens with
 * `O_NOFOLLOW`, so a symbolic link at any component — planted before or during the request — is never
 * followed: the walk starts at the volume root and only ever descends into directories it opened
 * itself. Files are first opened with `O_PATH` (which runs no driver code) and checked to be regular
 * before they are reopened for reading, so a device node or FIFO planted in a volume is never opened.
 */

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;
/** Linux `O_PATH` (not exported by Node): a descriptor that only names an inode. */
const O_PATH = 0o10000000;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK;

export const procPath = (handle: FileHandle, name?: string): string =>
  name === undefined ? `/proc/self/fd/${handle.fd}` : `/proc/self/fd/${handle.fd}/${name}`;

const errnoOf = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code;

/** A directory of the volume, held open; `path` is how the client names it. */
export class DirHandle {
  constructor(
    readonly handle: FileHandle,
    readonly path: VolumePath,
  ) {}

  /** `/proc/self/fd/<fd>/<name>`: `name` looked up in this very directory. */
  at(name: string): string {
    return procPath(this.handle, name);
  }

  get self(): string {
    return procPath(this.handle);
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

/** lstat of `name` in `dir`, or undefined when it does not exist. */
export async function lstatAt(dir: DirHandle, name: string): Promise<Stats | undefined> {
  try {
    return await fsp.lstat(dir.at(name));
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Opens `name` in `dir` as a directory, never through a link. Undefined when it does not exist; a
 * link gives 403, anything else that is not a directory gives `notDirectory`.
 */
export async function openChildDir(dir: DirHandle, name: string, notDirectory: (path: VolumePath) => ContentError): Promise<DirHandle | undefined> {
  const path = volumePathOf([...dir.path.segments, name]);
  try {
    return new DirHandle(await fsp.open(dir.at(name), DIR_FLAGS), path);
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT') return undefined;
    if (code === 'ENOTDIR' || code === 'ELOOP') {
      const stats = await lstatAt(dir, name);
      if (stats === undefined) return undefined;
      if (stats.isSymbolicLink()) throw symlinkRefused(path);
      throw notDirectory(path);
    }
    throw error;
  }
}

export const symlinkRefused = (path: VolumePath) =>
  forbidden(`"${path.display}" is a symbolic link; the volume-content API does not follow links (a link may point outside the volume)`);

export const notADirectory = (path: VolumePath) => new ContentError(404, `path "${path.display}" not found: it is not a directory`);
export const parentNotADirectory = (path: VolumePath) => pathConflict(`"${path.display}" exists and is not a directory`);

/** The volume root, opened from its trusted host path. */
export async function openVolumeRoot(contentDir: string): Promise<DirHandle> {
  try {
    return new DirHandle(await fsp.open(contentDir, DIR_FLAGS), volumePathOf([]));
  } catch (error) {
    // The catalog knows the volume but its directory is gone or unusable: the platform's fault.
    throw Object.assign(new Error(`volume directory ${contentDir} cannot be opened: ${(error as Error).message}`), { cause: error });
  }
}

export interface ParentOptions {
  /** Create missing directories on the way (makeDir with `force`), then hand each to `onCreated`. */
  create?: (dir: DirHandle) => Promise<void>;
  /** Status when a component exists but is not a directory: 404 for reads, 409 for writes. */
  notDirectory: (path: VolumePath) => ContentError;
}

/**
 * Walks from `root` to the directory holding the last component of `segments` and returns it open
 * (the caller closes it); `root` itself is never closed here. Every intermediate component must be a
 * real directory: missing → 404 (or created), link → 403, other → `notDirectory`.
 */
export async function openParent(root: DirHandle, segments: readonly string[], options: ParentOptions): Promise<DirHandle> {
  let current = root;
  try {
    for (const name of segments.slice(0, -1)) {
      let next = await openChildDir(current, name, options.notDirectory);
      if (next === undefined && options.create) {
        try {
          await fsp.mkdir(current.at(name), 0o755);
          next = await openChildDir(current, name, options.notDirectory);
          if (next) await options.create(next);
        } catch (error) {
          if (errnoOf(error) !== 'EEXIST') throw error;
          next = await openChildDir(current, name, options.notDirectory);
        }
      }
      if (next === undefined) throw pathNotFound(volumePathOf([...current.path.segments, name]).display);
      if (current !== root) await current.close();
      current = next;
    }
    return current;
  } catch (error) {
    if (current !== root) await current.close();
    throw error;
  }
}

/**
 * Opens `name` in `dir` with `O_PATH | O_NOFOLLOW` and returns it with its fstat: a link is held as
 * the link itself, a device node is named without being opened. Undefined when it does not exist.
 */
export async function pinEntry(dir: DirHandle, name: string): Promise<{ handle: FileHandle; stats: Stats } | undefined> {
  let handle: FileHandle;
  try {
    handle = await fsp.open(dir.at(name), O_PATH | O_NOFOLLOW);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  }
  try {
    // fstat(2) accepts an O_PATH descriptor.
    return { handle, stats: await handle.stat() };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/**
 * Reopens a pinned regular file for reading through its descriptor: the same inode that was checked,
 * whatever has been renamed or planted at its name since.
 */
export async function reopenForReading(pinned: FileHandle): Promise<FileHandle> {
  return fsp.open(procPath(pinned), O_RDONLY);
}

export { errnoOf };
