import { describe, expect, it } from 'vitest';
import { mountPointsUnder, parentPid } from './cluster-leftovers.ts';

const line = (id: number, point: string): string => `${id} 1 0:${id} / ${point} rw,relatime shared:1 - ext4 /dev/vda rw`;

describe('leftover discovery (pure parts)', () => {
  it('finds mount points at or under a directory, deepest first, with mountinfo octal escapes undone', () => {
    const info = [
      line(1, '/'),
      line(2, '/srv/c'),
      line(3, '/srv/c/node1/data'),
      line(4, '/srv/c/node1/data/overlay2/abc/merged'),
      line(5, '/srv/c2/node1/data'), // a sibling directory sharing the prefix: not under /srv/c
      line(6, '/srv/c/node\\0401/with\\040space'),
      line(7, '/srv/c/node1/data'), // mounted twice: listed once
      '',
    ].join('\n');
    expect(mountPointsUnder(info, '/srv/c')).toEqual(['/srv/c/node1/data/overlay2/abc/merged', '/srv/c/node 1/with space', '/srv/c/node1/data', '/srv/c']);
    expect(mountPointsUnder(info, '/srv/none')).toEqual([]);
  });

  it('reads the parent pid from /proc/<pid>/stat even when the command name holds spaces and parentheses', () => {
    expect(parentPid('1234 (node) S 1200 1234 1234 0 -1')).toBe(1200);
    expect(parentPid('99 (a) b) (c) R 7 99 99 0 -1')).toBe(7);
    expect(parentPid('')).toBeUndefined();
    expect(parentPid('12 (x) S notanumber')).toBeUndefined();
  });
});
