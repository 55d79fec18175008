import { type FSWatcher, mkdtempSync, promises as fs, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What the barrier needs of a directory watch: to hand on every raw event it has received. */
export interface SettlingWatch {
  /** Resolves once every raw event received so far is classified and delivered to the watch's consumer. */
  settled(): Promise<void>;
}

/** How long a barrier waits for its marker before giving up (only when something broke the marker directory). */
const MARKER_DEADLINE_MS = 2_000;

/**
 * Makes "the events of every completed change are delivered" hold for envd's directory watches.
 *
 * inotify queues an event when the change's system call returns, but envd learns of it only when
 * libuv next reads the inotify descriptor, and classifies it asynchronously after that. Every fs.watch
 * of the process shares libuv's one inotify descriptor, whose queue keeps kernel order. So a barrier
 * makes a change of its own (a marker file created in a private directory it watches) and waits for
 * that marker's event: when it arrives, every event queued before it (those of all changes completed
 * before the barrier began) has been handed to its watch in the same read. The barrier then waits for
 * each watch to finish classifying what it received.
 *
 * envd runs one barrier before it answers a write (upload, compose, make-dir, move, remove) and before
 * it drains a polling watcher, and only while a watch exists.
 */
export class WatchBarrier {
  private readonly watches = new Set<SettlingWatch>();
  private marker: { dir: string; watcher: FSWatcher } | undefined;
  private sequence = 0;
  /** Barriers waiting for their marker, by marker number. */
  private readonly waiting = new Map<number, () => void>();

  /** `parent` holds the private marker directory (made only while a watch exists). */
  /** The problem said last: said again only after a barrier worked in between. */
  private saidProblem: string | undefined;

  constructor(
    private readonly report: (message: string, error?: unknown) => void = () => undefined,
    private readonly parent: string = tmpdir(),
  ) {}

  private onProblem(message: string, error?: unknown): void {
    if (this.saidProblem === message) return;
    this.saidProblem = message;
    this.report(message, error);
  }

  add(watch: SettlingWatch): void {
    this.watches.add(watch);
  }

  delete(watch: SettlingWatch): void {
    this.watches.delete(watch);
    if (this.watches.size === 0) this.closeMarker();
  }

  /** Resolves when every change completed before the call is delivered by every live watch. */
  async settle(): Promise<void> {
    if (this.watches.size === 0) return;
    await this.markerPassed();
    await Promise.all([...this.watches].map((w) => w.settled()));
  }

  private async markerPassed(): Promise<void> {
    const marker = this.openMarker();
    if (!marker) return;
    const number = ++this.sequence;
    const name = join(marker.dir, String(number));
    let timer: NodeJS.Timeout | undefined;
    const passed = new Promise<boolean>((resolve) => {
      this.waiting.set(number, () => resolve(true));
      timer = setTimeout(() => resolve(false), MARKER_DEADLINE_MS);
    });
    try {
      await fs.writeFile(name, '', { flag: 'wx', mode: 0o600 });
    } catch (error) {
      // The directory went away (removed by the sandbox's code): start over with a new one next time.
      this.onProblem('watch barrier marker could not be written; events may lag', error);
      this.waiting.delete(number);
      clearTimeout(timer);
      this.closeMarker();
      return;
    }
    const arrived = await passed;
    clearTimeout(timer);
    this.waiting.delete(number);
    await fs.unlink(name).catch(() => undefined);
    if (!arrived) {
      this.onProblem('watch barrier marker did not arrive; events may lag');
      this.closeMarker();
    } else {
      this.saidProblem = undefined;
    }
  }

  /** The marker's event for `number` arrived: so did every earlier marker's. */
  private arrived(number: number): void {
    for (const [waiting, resolve] of this.waiting) {
      if (waiting <= number) {
        this.waiting.delete(waiting);
        resolve();
      }
    }
  }

  private openMarker(): { dir: string; watcher: FSWatcher } | undefined {
    if (this.marker) return this.marker;
    let dir: string | undefined;
    try {
      dir = mkdtempSync(join(this.parent, 'envd-watch-barrier-'));
      const watcher = watch(dir, { persistent: false }, (_kind, filename) => {
        const number = Number(filename?.toString());
        if (Number.isSafeInteger(number)) this.arrived(number);
      });
      watcher.on('error', () => this.closeMarker());
      this.marker = { dir, watcher };
      return this.marker;
    } catch (error) {
      this.onProblem('watch barrier could not watch its marker directory; events may lag', error);
      if (dir) rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
  }

  private closeMarker(): void {
    const marker = this.marker;
    this.marker = undefined;
    if (!marker) return;
    marker.watcher.close();
    rmSync(marker.dir, { recursive: true, force: true });
    for (const resolve of this.waiting.values()) resolve();
    this.waiting.clear();
  }
}
