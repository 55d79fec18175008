import { promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import type { SystemUser } from '../identity/system-users.ts';

const runsAsRoot = process.getuid?.() === 0;

/** Gives a path to the request user (only meaningful when envd runs as root). */
export async function chownToUser(path: string, user: SystemUser): Promise<void> {
  if (runsAsRoot) await fs.lchown(path, user.uid, user.gid);
}

/** `mkdir -p` that hands every directory it creates to the user. Returns false when `dir` already existed. */
export async function makeDirsOwnedBy(dir: string, user: SystemUser): Promise<boolean> {
  const missing: string[] = [];
  let current = dir;
  for (;;) {
    try {
      await fs.lstat(current);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      missing.push(current);
      const parent = dirname(current);
      if (parent === current) break;
      current = parent;
    }
  }
  if (missing.length === 0) return false;
  await fs.mkdir(dir, { recursive: true });
  for (const created of missing.reverse()) await chownToUser(created, user);
  return true;
}
