import { describe, expect, it } from 'vitest';
import { LXCFS_FILES, lxcfsMounts, mountTypeAt } from './lxcfs-files.ts';

const MOUNTINFO = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '40 22 0:35 / /var/lib/tidepool-lxcfs rw,nosuid,nodev,relatime shared:20 - fuse.lxcfs lxcfs rw,user_id=0,group_id=0,allow_other',
  '41 22 0:36 / /var/lib/with\\040space rw - tmpfs tmpfs rw',
].join('\n');

describe('lxcfs files', () => {
  it('binds each file the mount serves over the container\'s own, read from the mount dir', () => {
    const mounts = lxcfsMounts('/var/lib/tidepool-lxcfs/', (file) => file !== 'proc/loadavg');
    expect(mounts).toHaveLength(LXCFS_FILES.length - 1);
    expect(mounts).toContainEqual({ source: '/var/lib/tidepool-lxcfs/proc/meminfo', target: '/proc/meminfo' });
    expect(mounts).toContainEqual({ source: '/var/lib/tidepool-lxcfs/sys/devices/system/cpu/online', target: '/sys/devices/system/cpu/online' });
    expect(mounts.some((m) => m.target === '/proc/loadavg')).toBe(false);
  });

  it('finds the filesystem type mounted at a directory', () => {
    expect(mountTypeAt(MOUNTINFO, '/var/lib/tidepool-lxcfs')).toBe('fuse.lxcfs');
    expect(mountTypeAt(MOUNTINFO, '/var/lib/tidepool-lxcfs/')).toBe('fuse.lxcfs');
    expect(mountTypeAt(MOUNTINFO, '/var/lib/with space')).toBe('tmpfs');
    expect(mountTypeAt(MOUNTINFO, '/var/lib')).toBeUndefined();
    expect(mountTypeAt('garbage\n\n', '/')).toBeUndefined();
  });
});
