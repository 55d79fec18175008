import { type BigIntStats, type FSWatcher, promises as fs, watch } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { EventType } from '@tidepool/protocol/filesystem';
import { stagedWriteEvents } from './staged-write-events.ts';
import { StagedWriteTracker } from './staged-write-tracker.ts';
import { isStagingPath, type StagingPurpose } from './staging-names.ts';
import type { SettlingWatch, WatchBarrier } from './watch-barrier.ts';

export interface WatchEvent {
  /** Path relative to the watched directory. */
  name: string;
  /** Absolute path of the entry. */
  path: string;
  type: EventType;
}

/**
 * One callback of fs.watch: `rename` (IN_CREATE/DELETE/MOVED_*, and any event of a directory since
 * IN_ISDIR counts as a rename bit in libuv) or `change` (IN_MODIFY/IN_ATTRIB of a non-directory).
 */
interface RawEvent {
  dir: string;
  kind: string;
  path: string;
  receivedAt: number;
}

type Classified = EventType | undefined;

interface RecentWalk {
  /** When the walk had read its directory. */
  at: number;
  /** Whether the walk already emitted CREATE for what it found. */
  announced: boolean;
  paths: Set<string>;
}

/** How long after a walk an event may still be the late report of a creation the walk saw. */
const WALK_GRACE_MS = 50;

/**
 * inotify-backed watch of one directory, optionally of its whole tree (directories created later
 * included). Node's fs.watch is not recursive on Linux, so each directory gets its own watch; they
 * share libuv's single inotify descriptor, so the events of one read arrive in kernel order in the
 * same tick and are classified together:
 *
 * - `rename` toggles the known existence of a name: an unknown name was created, a known one went
 *   away. A disappearance directly followed by the appearance of another name (same inode when
 *   known) is a move: the old name reports RENAME, the new one CREATE (as fsnotify does).
 * - `change` is WRITE when the entry's ctime equals its mtime (a data write sets both), else CHMOD
 *   (chmod/chown/utimes touch only ctime). A `rename` of a known directory that is still there
 *   (same inode) is its IN_ATTRIB, hence CHMOD.
 * - Events a directory's own watch reports about itself are dropped (the parent reports them).
 * - envd's own staging files (uploads, compose) are never reported. One renamed onto its target is
 *   reported, under the target's name, as the reference's direct write of it (staged-write-events.ts):
 *   an upload of a new file as CREATE, CHMOD (its chown), WRITE.
 */
export class DirectoryWatcher implements SettlingWatch {
  private readonly watchers = new Map<string, FSWatcher>();
  /** Names believed to exist under the watched directories, with their inode when it is known. */
  private readonly known = new Map<string, bigint | undefined>();
  /**
   * Names a directory walk found recently. inotify may still deliver the creation of such a name
   * (it happened between setting the watch and reading the directory); it must not read as removal.
   */
  private recentWalks: RecentWalk[] = [];
  private batch: RawEvent[] = [];
  private flushScheduled = false;
  private closed = false;
  /** Batches are handled one at a time so events are reported in the order inotify gave them. */
  private pending: Promise<void> = Promise.resolve();
  private readonly stagedWrites = new StagedWriteTracker();

  constructor(
    private readonly root: string,
    private readonly recursive: boolean,
    private readonly onEvent: (event: WatchEvent) => void,
    private readonly onError: (error: Error) => void,
    private readonly barrier: WatchBarrier,
  ) {}

  async start(): Promise<void> {
    this.barrier.add(this);
    try {
      await this.watchTree(this.root, false);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  /** Resolves once every raw event received so far is classified and handed to `onEvent`. */
  settled(): Promise<void> {
    if (this.batch.length > 0) this.flush();
    return this.pending;
  }

  close(): void {
    this.barrier.delete(this);
    this.closed = true;
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
    this.known.clear();
    this.stagedWrites.clear();
    this.batch = [];
  }

  /** Watches `dir` (and its subdirectories when recursive); `announce` emits CREATE for entries found. */
  private async watchTree(dir: string, announce: boolean): Promise<void> {
    this.watchDir(dir);
    const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
    const walk: RecentWalk = { at: Date.now(), announced: announce, paths: new Set() };
    if (this.closed) return;
    this.recentWalks.push(walk);
    for (const entry of entries) {
      if (this.closed) return;
      const path = join(dir, entry.name);
      if (this.known.has(path) || isStagingPath(path)) continue;
      this.known.set(path, undefined);
      walk.paths.add(path);
      if (announce) this.emit(path, EventType.CREATE);
      if (this.recursive && entry.isDirectory()) await this.watchTree(path, announce);
    }
  }

  private watchDir(dir: string): void {
    if (this.closed || this.watchers.has(dir)) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, (kind, filename) => {
        if (!filename || this.closed) return;
        this.batch.push({ dir, kind, path: join(dir, filename.toString()), receivedAt: Date.now() });
        if (!this.flushScheduled) {
          this.flushScheduled = true;
          setImmediate(() => this.flush());
        }
      });
    } catch (error) {
      if (dir === this.root) throw error;
      return; // a subdirectory that vanished before it could be watched
    }
    watcher.on('error', (error) => {
      if (dir === this.root && !this.closed) this.onError(error);
      this.forget(dir);
    });
    this.watchers.set(dir, watcher);
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.pending = this.pending.then(() => this.handleBatch(batch)).catch((error: Error) => {
      if (!this.closed) this.onError(error);
    });
  }

  /** Stops watching `path` and everything below it, and forgets the names there. */
  private forget(path: string): void {
    const prefix = `${path}/`;
    for (const [dir, watcher] of this.watchers) {
      if (dir === path || dir.startsWith(prefix)) {
        watcher.close();
        this.watchers.delete(dir);
      }
    }
    for (const name of this.known.keys()) {
      if (name.startsWith(prefix)) this.known.delete(name);
    }
    this.stagedWrites.forget(path);
  }

  private emit(path: string, type: EventType): void {
    if (!this.closed) this.onEvent({ name: relative(this.root, path), path, type });
  }

  private async handleBatch(batch: RawEvent[]): Promise<void> {
    const stats = new Map<string, BigIntStats | undefined>();
    const statOf = async (path: string): Promise<BigIntStats | undefined> => {
      if (!stats.has(path)) stats.set(path, await fs.lstat(path, { bigint: true }).catch(() => undefined));
      return stats.get(path);
    };
    const oldest = batch[0]?.receivedAt ?? Date.now();
    this.recentWalks = this.recentWalks.filter((walk) => oldest - walk.at <= WALK_GRACE_MS && walk.paths.size > 0);
    const lastRename = new Map<string, number>();
    batch.forEach((event, index) => {
      if (event.kind === 'rename') lastRename.set(event.path, index);
    });
    let previous: Classified;
    for (let i = 0; i < batch.length && !this.closed; i++) {
      const event = batch[i];
      if (await this.isSelfEvent(event, statOf)) continue;
      if (isStagingPath(event.path)) {
        // Its content and attribute changes are not reported; its creation and removal are tracked.
        if (event.kind === 'rename') this.stagedWrites.noteStagingRename(event.dir, event.path, await statOf(event.path));
        continue;
      }
      if (this.stagedWrites.awaitingCommit) {
        const stats = await statOf(event.path);
        const purpose = this.stagedWrites.takeCommit(event.dir, event.kind, stats);
        if (purpose && stats) {
          previous = this.reportStagedWrite(event.path, stats, purpose);
          continue;
        }
      }
      const renamedLater = (lastRename.get(event.path) ?? -1) > i;
      previous = event.kind === 'change'
        ? await this.handleChange(event.path, renamedLater, statOf)
        : await this.handleRename(event, previous, renamedLater, batch[i + 1], statOf);
    }
    // Re-sync with the disk so that a misread batch cannot skew later classifications.
    for (const event of batch) {
      if (this.closed || event.path === this.root || isStagingPath(event.path)) continue;
      const current = await fs.lstat(event.path, { bigint: true }).catch(() => undefined);
      if (current && !this.known.has(event.path) && this.watchers.has(event.dir)) this.known.set(event.path, current.ino);
      if (!current && this.known.has(event.path)) this.known.delete(event.path);
    }
  }

  /**
   * A staging file renamed onto `path`: reported as the reference's direct write would be (see
   * staged-write-events.ts). A name a recent walk found is known already (and was announced by that
   * walk when it was new).
   */
  private reportStagedWrite(path: string, stats: BigIntStats, purpose: StagingPurpose): EventType {
    for (const walk of this.recentWalks) walk.paths.delete(path);
    const existed = this.known.has(path);
    this.known.set(path, stats.ino);
    const events = stagedWriteEvents(purpose, existed, stats.size > 0n);
    for (const type of events) this.emit(path, type);
    return events[events.length - 1];
  }

  /** A directory's own watch reports its deletion/move/chmod with its own name; the parent reports those. */
  private async isSelfEvent(event: RawEvent, statOf: (p: string) => Promise<BigIntStats | undefined>): Promise<boolean> {
    if (basename(event.path) !== basename(event.dir) || this.known.has(event.path)) return false;
    return (await statOf(event.path)) === undefined;
  }

  private async handleChange(path: string, renamedLater: boolean, statOf: (p: string) => Promise<BigIntStats | undefined>): Promise<Classified> {
    const stats = await statOf(path);
    if (!stats) {
      // Changed, then gone: the content change happened; its removal follows as a `rename`.
      this.emit(path, EventType.WRITE);
      return EventType.WRITE;
    }
    // When the name is renamed over later in the batch, its stats describe another inode: say WRITE.
    const attributesOnly = stats.isDirectory() || (!renamedLater && stats.ctimeNs !== stats.mtimeNs);
    const type = attributesOnly ? EventType.CHMOD : EventType.WRITE;
    this.emit(path, type);
    return type;
  }

  private async handleRename(
    event: RawEvent,
    previous: Classified,
    renamedLater: boolean,
    next: RawEvent | undefined,
    statOf: (p: string) => Promise<BigIntStats | undefined>,
  ): Promise<Classified> {
    const path = event.path;
    const stats = await statOf(path);
    const walk = this.recentWalks.find((w) => event.receivedAt - w.at <= WALK_GRACE_MS && w.paths.delete(path));
    if (walk && stats) {
      // The creation of a name a walk already found: report it once.
      if (walk.announced) return undefined;
      this.emit(path, EventType.CREATE);
      return EventType.CREATE;
    }
    const inode = this.known.get(path);
    if (
      stats?.isDirectory() && this.known.has(path) && previous !== EventType.RENAME
      && (inode === undefined || inode === stats.ino) && !renamedLater
    ) {
      // libuv reports IN_ATTRIB of a directory as `rename` (IN_ISDIR is set): the directory is still there.
      this.emit(path, EventType.CHMOD);
      return EventType.CHMOD;
    }
    if (!this.known.has(path) || (stats && previous === EventType.RENAME)) {
      // A new name, or a move onto an existing name (one moved_to right after the moved_from).
      this.known.set(path, stats?.ino);
      this.emit(path, EventType.CREATE);
      if (this.recursive && stats?.isDirectory()) await this.watchTree(path, true);
      return EventType.CREATE;
    }
    this.known.delete(path);
    if (this.watchers.has(path)) this.forget(path);
    const type = (await this.isMoveTarget(path, inode, next, statOf)) ? EventType.RENAME : EventType.REMOVE;
    this.emit(path, type);
    return type;
  }

  /** Whether `next` is the appearing half of a move whose disappearing half is `path`. */
  private async isMoveTarget(
    path: string,
    inode: bigint | undefined,
    next: RawEvent | undefined,
    statOf: (p: string) => Promise<BigIntStats | undefined>,
  ): Promise<boolean> {
    if (!next || next.kind !== 'rename' || next.path === path) return false;
    const target = await statOf(next.path);
    if (!target) return false;
    return inode === undefined || inode === target.ino;
  }
}
