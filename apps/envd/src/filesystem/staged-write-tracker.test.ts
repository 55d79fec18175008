import type { BigIntStats } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { StagedWriteTracker } from './staged-write-tracker.ts';

const file = (ino: bigint) => ({ ino, isFile: () => true }) as unknown as BigIntStats;
const directory = (ino: bigint) => ({ ino, isFile: () => false }) as unknown as BigIntStats;
const STAGING = '/w/.a.txt.upload-0123456789ab';

describe('StagedWriteTracker', () => {
  it('pairs a vanished staging file with the name that appears next with its inode', () => {
    const tracker = new StagedWriteTracker();
    tracker.noteStagingRename('/w', STAGING, file(7n));
    expect(tracker.awaitingCommit).toBe(false);
    tracker.noteStagingRename('/w', STAGING, undefined);
    expect(tracker.awaitingCommit).toBe(true);
    expect(tracker.takeCommit('/w', 'rename', file(7n))).toBe('upload');
    expect(tracker.awaitingCommit).toBe(false);
  });

  it('accepts any regular file when the staging inode was never seen', () => {
    const tracker = new StagedWriteTracker();
    tracker.noteStagingRename('/w', STAGING, undefined);
    expect(tracker.takeCommit('/w', 'rename', file(99n))).toBe('upload');
  });

  it('tells an upload from a compose by the staging name', () => {
    const tracker = new StagedWriteTracker();
    tracker.noteStagingRename('/w', '/w/.joined.compose-0123456789ab', undefined);
    expect(tracker.takeCommit('/w', 'rename', file(5n))).toBe('compose');
  });

  it('refuses another inode, directory, kind or directory entry, and any later event', () => {
    const cases: Array<[string, string, BigIntStats | undefined]> = [
      ['/w', 'rename', file(8n)],
      ['/w', 'rename', directory(7n)],
      ['/w', 'change', file(7n)],
      ['/other', 'rename', file(7n)],
      ['/w', 'rename', undefined],
    ];
    for (const [dir, kind, stats] of cases) {
      const tracker = new StagedWriteTracker();
      tracker.noteStagingRename('/w', STAGING, file(7n));
      tracker.noteStagingRename('/w', STAGING, undefined);
      expect(tracker.takeCommit(dir, kind, stats)).toBeUndefined();
      // The wait ended with that event: the right file appearing afterwards is an ordinary creation.
      expect(tracker.takeCommit('/w', 'rename', file(7n))).toBeUndefined();
    }
  });

  it('forgets staging files under a directory no longer watched', () => {
    const tracker = new StagedWriteTracker();
    tracker.noteStagingRename('/w/sub', '/w/sub/.x.upload-0123456789ab', undefined);
    tracker.forget('/w');
    expect(tracker.awaitingCommit).toBe(false);
  });
});
