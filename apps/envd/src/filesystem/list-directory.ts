import { Code, ConnectError } from '@connectrpc/connect';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { type EntryInfo, FileType } from '@tidepool/protocol/filesystem';
import type { SystemUsers } from '../identity/system-users.ts';
import { buildEntryInfo } from './entry-info.ts';

/**
 * Lists `root` down to `depth` levels. A symlinked root is followed; nested symlinks are not.
 * Entry paths are reported under the requested path; entries that vanish mid-walk are skipped.
 */
export async function listDirectory(root: string, depth: number, users: SystemUsers): Promise<EntryInfo[]> {
  const stats = await fs.stat(root);
  if (!stats.isDirectory()) throw new ConnectError(`path is not a directory: ${root}`, Code.InvalidArgument);
  const entries: EntryInfo[] = [];
  const walk = async (dir: string, level: number): Promise<void> => {
    let names: string[];
    try {
      names = await fs.readdir(dir);
    } catch (error) {
      if (level > 1 && ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'EACCES')) return;
      throw error;
    }
    names.sort();
    for (const name of names) {
      const path = join(dir, name);
      let entry: EntryInfo;
      try {
        entry = await buildEntryInfo(path, users);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      entries.push(entry);
      // A link to a directory reads as a directory too; only real directories are walked into.
      if (level < depth && entry.type === FileType.DIRECTORY && entry.symlinkTarget === undefined) await walk(path, level + 1);
    }
  };
  await walk(root, 1);
  return entries;
}
