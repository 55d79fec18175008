import type { Stats } from 'node:fs';

export type VolumeEntryType = 'file' | 'directory' | 'symlink' | 'unknown';

/** What every content-API call answers about an entry (the reference's `VolumeEntryStat`). */
export interface VolumeEntryStat {
  name: string;
  type: VolumeEntryType;
  /** From the volume root, with a leading `/` (the root itself is `/`), as the SDK shows it. */
  path: string;
  size: number;
  /** Permission bits only (`st_mode & 0o7777`): a file written with mode 0o644 reads back 0o644. */
  mode: number;
  uid: number;
  gid: number;
  /** RFC 3339 (UTC, milliseconds): the SDK turns them into `Date`s. */
  atime: string;
  mtime: string;
  ctime: string;
  /** A symbolic link's target, verbatim (never followed). */
  target?: string;
}

/** FIFOs, sockets and device nodes are `unknown`: listed, never opened. */
export function entryTypeOf(stats: Stats): VolumeEntryType {
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isDirectory()) return 'directory';
  if (stats.isFile()) return 'file';
  return 'unknown';
}

/** `stats` must come from lstat (or fstat of a descriptor opened without following links). */
export function toEntryStat(stats: Stats, name: string, path: string, target?: string): VolumeEntryStat {
  const type = entryTypeOf(stats);
  const entry: VolumeEntryStat = {
    name,
    type,
    path,
    size: stats.size,
    mode: stats.mode & 0o7777,
    uid: stats.uid,
    gid: stats.gid,
    atime: stats.atime.toISOString(),
    mtime: stats.mtime.toISOString(),
    ctime: stats.ctime.toISOString(),
  };
  if (type === 'symlink' && target !== undefined) entry.target = target;
  return entry;
}
