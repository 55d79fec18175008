import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DirectoryWatcher, type WatchEvent } from './directory-watcher.ts';
import { WatchBarrier } from './watch-barrier.ts';

/** A parent of the marker directories of this file's barriers alone. */
const parent = mkdtempSync(join(tmpdir(), 'envd-barrier-parent-'));
const barrierDirs = () => readdirSync(parent).filter((name) => name.startsWith('envd-watch-barrier-'));

describe('WatchBarrier', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const step of cleanup.splice(0)) step();
  });
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  function watched(barrier: WatchBarrier): { root: string; events: WatchEvent[]; watcher: DirectoryWatcher } {
    const root = mkdtempSync(join(tmpdir(), 'envd-barrier-test-'));
    const events: WatchEvent[] = [];
    const watcher = new DirectoryWatcher(root, false, (event) => events.push(event), (error) => {
      throw error;
    }, barrier);
    cleanup.push(() => {
      watcher.close();
      rmSync(root, { recursive: true, force: true });
    });
    return { root, events, watcher };
  }

  it('settles with nothing to do while no watch exists, and makes no marker directory', async () => {
    await new WatchBarrier(undefined, parent).settle();
    expect(barrierDirs()).toEqual([]);
  });

  it('hands a synchronous change to the watch before settle resolves, every time', async () => {
    const barrier = new WatchBarrier(undefined, parent);
    const { root, events, watcher } = watched(barrier);
    await watcher.start();
    for (let i = 0; i < 300; i++) {
      writeFileSync(join(root, `f${i}`), 'x');
      await barrier.settle();
      expect(events.map((e) => `${e.type} ${e.name}`).filter((l) => l.endsWith(` f${i}`)).length, `change #${i}`).toBeGreaterThan(0);
    }
  });

  it('survives its marker directory being removed by a sandbox process, and removes it when the last watch closes', async () => {
    const problems: string[] = [];
    const barrier = new WatchBarrier((message) => problems.push(message), parent);
    const { root, events, watcher } = watched(barrier);
    await watcher.start();
    await barrier.settle();
    const mine = barrierDirs();
    expect(mine).toHaveLength(1);
    for (const name of mine) rmSync(join(parent, name), { recursive: true, force: true });
    // The barrier that finds it gone says so and still resolves; the next one works again.
    await barrier.settle();
    writeFileSync(join(root, 'after'), 'x');
    await barrier.settle();
    expect(events.some((e) => e.name === 'after')).toBe(true);
    expect(problems).toEqual(['watch barrier marker could not be written; events may lag']);
    watcher.close();
    expect(barrierDirs()).toEqual([]);
  });
});
