import { type EntryInfo, EventType, type FilesystemEvent, type WatchDirResponse } from '@tidepool/protocol/filesystem';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { WatchDirResponseSchema } from '@tidepool/protocol/filesystem';
import type { SystemUsers } from '../identity/system-users.ts';
import { buildEntryInfo } from './entry-info.ts';
import { DirectoryWatcher, type WatchEvent } from './directory-watcher.ts';
import type { WatchBarrier } from './watch-barrier.ts';

type WatchResponseInit = MessageInitShape<typeof WatchDirResponseSchema>;
export type FilesystemEventInit = Pick<FilesystemEvent, 'name' | 'type'> & { entry?: EntryInfo };

export interface WatchOptions {
  root: string;
  recursive: boolean;
  includeEntry: boolean;
  users: SystemUsers;
  /** Lets writes wait until this watch has their events. */
  barrier: WatchBarrier;
}

/** Events whose entry still exists under the reported name. */
const WITH_ENTRY = new Set<EventType>([EventType.CREATE, EventType.WRITE, EventType.CHMOD]);

/** Turns a raw watch event into the wire event, with entry info when asked for and still stat-able. */
export async function toFilesystemEvent(event: WatchEvent, options: WatchOptions): Promise<FilesystemEventInit> {
  let entry: EntryInfo | undefined;
  if (options.includeEntry && WITH_ENTRY.has(event.type)) entry = await buildEntryInfo(event.path, options.users).catch(() => undefined);
  return { name: event.name, type: event.type, entry };
}

/** Server stream of a directory watch: `start{}`, then events and keepalives until `signal` aborts. */
export async function* watchStream(options: WatchOptions, signal: AbortSignal, keepaliveMs: number): AsyncGenerator<WatchResponseInit> {
  const queue: Array<WatchEvent | Error> = [];
  let wake: (() => void) | undefined;
  const notify = (): void => {
    wake?.();
    wake = undefined;
  };
  const watcher = new DirectoryWatcher(options.root, options.recursive, (event) => {
    queue.push(event);
    notify();
  }, (error) => {
    queue.push(error);
    notify();
  }, options.barrier);
  await watcher.start();
  signal.addEventListener('abort', notify, { once: true });
  try {
    yield { event: { case: 'start', value: {} } };
    while (!signal.aborted) {
      if (queue.length === 0) {
        const timedOut = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(true), keepaliveMs);
          wake = () => {
            clearTimeout(timer);
            resolve(false);
          };
        });
        if (signal.aborted) break;
        if (timedOut && queue.length === 0) {
          yield { event: { case: 'keepalive', value: {} } };
          continue;
        }
      }
      const next = queue.shift();
      if (next === undefined) continue;
      if (next instanceof Error) throw next;
      yield { event: { case: 'filesystem', value: await toFilesystemEvent(next, options) } };
    }
  } finally {
    watcher.close();
    signal.removeEventListener('abort', notify);
  }
}

export type { WatchDirResponse };
