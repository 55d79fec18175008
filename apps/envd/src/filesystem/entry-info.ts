import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { type Stats, promises as fs } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { type EntryInfo, EntryInfoSchema, FileType } from '@tidepool/protocol/filesystem';
import type { SystemUsers } from '../identity/system-users.ts';
import { readMetadata } from './xattr-metadata.ts';

const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_ISVTX = 0o1000;

/** Go-style mode string, as the reference agent prints it: `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`. */
export function permissionString(stats: Stats): string {
  let prefix = '';
  if (stats.isDirectory()) prefix += 'd';
  if (stats.isSymbolicLink()) prefix += 'L';
  if (stats.isBlockDevice()) prefix += 'D';
  if (stats.isFIFO()) prefix += 'p';
  if (stats.isSocket()) prefix += 'S';
  if (stats.mode & S_ISUID) prefix += 'u';
  if (stats.mode & S_ISGID) prefix += 'g';
  if (stats.isCharacterDevice()) prefix += 'c';
  if (stats.mode & S_ISVTX) prefix += 't';
  const rwx = 'rwxrwxrwx';
  let bits = '';
  for (let i = 0; i < 9; i++) bits += stats.mode & (1 << (8 - i)) ? rwx[i] : '-';
  return (prefix || '-') + bits;
}

/**
 * The type an entry reports: that of what it resolves to. FILE_TYPE_SYMLINK is never sent (as in the
 * reference): clients built before that enum value fail to parse any answer that carries it. A link
 * shows as a link through `symlinkTarget` and its `L` permissions.
 */
function fileType(stats: Stats | undefined): FileType {
  if (stats?.isDirectory()) return FileType.DIRECTORY;
  if (stats?.isFile()) return FileType.FILE;
  return FileType.UNSPECIFIED;
}

/**
 * Builds the EntryInfo of a path (lstat). A symlink reports its target's type, size and mode
 * (UNSPECIFIED and its own when dangling or looping), with `symlinkTarget` set.
 */
export async function buildEntryInfo(absolutePath: string, users: SystemUsers, displayPath?: string): Promise<EntryInfo> {
  const stats = await fs.lstat(absolutePath);
  let target: Stats | undefined = stats;
  let symlinkTarget: string | undefined;
  if (stats.isSymbolicLink()) {
    const link = await fs.readlink(absolutePath);
    symlinkTarget = resolve(dirname(absolutePath), link);
    target = await fs.stat(absolutePath).catch(() => undefined);
  }
  const effective = target ?? stats;
  return create(EntryInfoSchema, {
    name: basename(absolutePath),
    type: fileType(target),
    path: displayPath ?? absolutePath,
    size: BigInt(effective.size),
    mode: effective.mode & 0o7777,
    permissions: permissionString(stats),
    owner: users.userName(stats.uid),
    group: users.groupName(stats.gid),
    modifiedTime: timestampFromMs(Math.floor(stats.mtimeMs)),
    symlinkTarget,
    metadata: await readMetadata(absolutePath),
  });
}
