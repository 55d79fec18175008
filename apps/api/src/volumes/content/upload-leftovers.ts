import { promises as fsp } from 'node:fs';
import type { Logger } from 'pino';
import { UPLOAD_TEMP_PREFIX } from './file-upload.ts';
import { type DirHandle, lstatAt, notADirectory, openChildDir, openVolumeRoot } from './volume-tree.ts';

/** Entries looked at per volume before the sweep gives up on it (a huge tree is not walked forever). */
const MAX_VISITED = 1_000_000;

/**
 * Removes the temporary files of uploads a crash interrupted: regular files named
 * `.tidepool-upload-*` anywhere in each volume, last written before `startedAt` (uploads of this
 * process are newer and untouched). Walks like every content call, never through links.
 */
export async function sweepUploadLeftovers(contentDirs: Iterable<[volumeID: string, dir: string]>, startedAt: number, logger: Logger): Promise<number> {
  let removed = 0;
  for (const [volumeID, dir] of contentDirs) {
    let root: DirHandle | undefined;
    try {
      root = await openVolumeRoot(dir);
      const budget = { left: MAX_VISITED };
      const count = await sweepDir(root, startedAt, budget, 0);
      removed += count;
      if (count > 0) logger.info({ volumeID, removed: count }, 'removed temporary files of uploads interrupted by a crash');
      if (budget.left <= 0) logger.warn({ volumeID }, `volume has more than ${MAX_VISITED} entries; interrupted uploads beyond them were not looked for`);
    } catch (error) {
      logger.warn({ err: error, volumeID }, 'could not sweep a volume for interrupted uploads');
    } finally {
      await root?.close();
    }
  }
  return removed;
}

async function sweepDir(dir: DirHandle, startedAt: number, budget: { left: number }, level: number): Promise<number> {
  let removed = 0;
  for (const name of await fsp.readdir(dir.self)) {
    if (--budget.left < 0) return removed;
    const stats = await lstatAt(dir, name);
    if (!stats) continue;
    if (stats.isFile() && name.startsWith(UPLOAD_TEMP_PREFIX) && stats.mtimeMs < startedAt) {
      await fsp.unlink(dir.at(name)).catch(() => undefined);
      removed += 1;
    } else if (stats.isDirectory() && level < 256) {
      const child = await openChildDir(dir, name, notADirectory).catch(() => undefined);
      if (!child) continue;
      try {
        removed += await sweepDir(child, startedAt, budget, level + 1);
      } finally {
        await child.close();
      }
    }
  }
  return removed;
}

