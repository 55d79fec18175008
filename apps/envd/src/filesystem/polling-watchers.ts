import { Code, ConnectError } from '@connectrpc/connect';
import { randomBytes } from 'node:crypto';
import { DirectoryWatcher } from './directory-watcher.ts';
import type { WatchBarrier } from './watch-barrier.ts';
import { type FilesystemEventInit, toFilesystemEvent, type WatchOptions } from './watch-stream.ts';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const MAX_BUFFERED_EVENTS = 10_000;

function newWatcherId(): string {
  return `w${Array.from(randomBytes(20), (b) => ALPHABET[b % ALPHABET.length]).join('')}`;
}

interface PollingWatcher {
  watcher: DirectoryWatcher;
  events: Promise<FilesystemEventInit>[];
  error: Error | undefined;
}

/** The polling alternative to WatchDir: events are buffered until GetWatcherEvents drains them. */
export class PollingWatchers {
  private readonly watchers = new Map<string, PollingWatcher>();

  constructor(private readonly barrier: WatchBarrier) {}

  async create(options: WatchOptions): Promise<string> {
    const id = newWatcherId();
    const entry: PollingWatcher = { watcher: undefined as unknown as DirectoryWatcher, events: [], error: undefined };
    entry.watcher = new DirectoryWatcher(options.root, options.recursive, (event) => {
      if (entry.events.length < MAX_BUFFERED_EVENTS) entry.events.push(toFilesystemEvent(event, options));
    }, (error) => {
      entry.error = error;
    }, this.barrier);
    await entry.watcher.start();
    this.watchers.set(id, entry);
    return id;
  }

  /** The events so far, including those of every change completed before the call (see watch-barrier.ts). */
  async drain(id: string): Promise<FilesystemEventInit[]> {
    this.require(id);
    await this.barrier.settle();
    const entry = this.require(id);
    if (entry.error) {
      this.remove(id);
      throw new ConnectError(`watcher failed: ${entry.error.message}`, Code.Internal);
    }
    const pending = entry.events.splice(0);
    return Promise.all(pending);
  }

  remove(id: string): void {
    this.require(id).watcher.close();
    this.watchers.delete(id);
  }

  private require(id: string): PollingWatcher {
    const entry = this.watchers.get(id);
    if (!entry) throw new ConnectError(`watcher with id ${id} not found`, Code.NotFound);
    return entry;
  }
}
