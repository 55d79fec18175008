import type { BigIntStats } from 'node:fs';
import { type StagingPurpose, stagingPurposeOf } from './staging-names.ts';

/**
 * Follows envd's own staging files (see staging-names.ts) through the raw events of a directory watch,
 * to recognise the moment one is renamed onto its target: inotify reports that as the staging name
 * disappearing, directly followed by the target name appearing in the same directory.
 */
export class StagedWriteTracker {
  /** Inodes of the staging files seen while they existed, by path. */
  private readonly inodes = new Map<string, bigint>();
  /** The staging file that disappeared last, as long as no other name has had an event since. */
  private vanished: { dir: string; inode: bigint | undefined; purpose: StagingPurpose } | undefined;

  /** Notes a `rename` event of a staging path; `stats` are its current stats (undefined once gone). */
  noteStagingRename(dir: string, path: string, stats: BigIntStats | undefined): void {
    if (stats) {
      this.inodes.set(path, stats.ino);
      return;
    }
    this.vanished = { dir, inode: this.inodes.get(path), purpose: stagingPurposeOf(path) ?? 'upload' };
    this.inodes.delete(path);
  }

  /**
   * Whether an event of a non-staging name is the arrival of the staging file that vanished just before
   * (a committed write): a `rename` in the same directory of a regular file with the staging file's
   * inode, when that was known. Gives the staging file's purpose when it is, undefined when not. Any
   * such event ends the wait for an arrival.
   */
  takeCommit(dir: string, kind: string, stats: BigIntStats | undefined): StagingPurpose | undefined {
    const vanished = this.vanished;
    this.vanished = undefined;
    if (!vanished || kind !== 'rename' || vanished.dir !== dir || !stats?.isFile()) return undefined;
    return vanished.inode === undefined || vanished.inode === stats.ino ? vanished.purpose : undefined;
  }

  /** Whether an event may complete a staged write (only then does takeCommit need stats). */
  get awaitingCommit(): boolean {
    return this.vanished !== undefined;
  }

  /** Drops what is known under `dir` (no longer watched). */
  forget(dir: string): void {
    const prefix = `${dir}/`;
    for (const path of this.inodes.keys()) if (path.startsWith(prefix)) this.inodes.delete(path);
    if (this.vanished && (this.vanished.dir === dir || this.vanished.dir.startsWith(prefix))) this.vanished = undefined;
  }

  clear(): void {
    this.inodes.clear();
    this.vanished = undefined;
  }
}
