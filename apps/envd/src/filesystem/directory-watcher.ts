import { type FSWatcher, promises as fs, watch } from 'node:fs';
import { join, relative } from 'node:path';
import { EventType } from '@tidepool/protocol/filesystem';

export interface WatchEvent {
  /** Path relative to the watched directory. */
  name: string;
  /** Absolute path of the entry. */
  path: string;
  type: EventType;
}

/**
 * inotify-backed watch of one directory, optionally of its whole tree (directories created later
 * included). Node's fs.watch is not recursive on Linux, so each directory gets its own watch.
 */
export class DirectoryWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private closed = false;
  /** Events are handled one at a time so they are reported in the order inotify gave them. */
  private pending: Promise<void> = Promise.resolve();

  constructor(
    private readonly root: string,
    private readonly recursive: boolean,
    private readonly onEvent: (event: WatchEvent) => void,
    private readonly onError: (error: Error) => void,
  ) {}

  async start(): Promise<void> {
    await this.watchTree(this.root);
  }

  close(): void {
    this.closed = true;
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private async watchTree(dir: string): Promise<void> {
    this.watchDir(dir);
    if (!this.recursive) return;
    const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      if (entry.isDirectory()) await this.watchTree(join(dir, entry.name));
    }
  }

  private watchDir(dir: string): void {
    if (this.closed || this.watchers.has(dir)) return;
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, (kind, filename) => {
        if (!filename) return;
        this.pending = this.pending.then(() => this.handle(dir, kind, filename.toString())).catch((error: Error) => this.onError(error));
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

  private forget(dir: string): void {
    for (const [path, watcher] of this.watchers) {
      if (path === dir || path.startsWith(`${dir}/`)) {
        watcher.close();
        this.watchers.delete(path);
      }
    }
  }

  private async handle(dir: string, kind: string, filename: string): Promise<void> {
    if (this.closed) return;
    const path = join(dir, filename);
    const emit = (type: EventType): void => {
      if (!this.closed) this.onEvent({ name: relative(this.root, path), path, type });
    };
    if (kind === 'change') return emit(EventType.WRITE);
    const stats = await fs.lstat(path).catch(() => undefined);
    if (!stats) {
      this.forget(path);
      return emit(EventType.REMOVE);
    }
    emit(EventType.CREATE);
    if (this.recursive && stats.isDirectory()) await this.watchTree(path);
  }
}
