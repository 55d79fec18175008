import { mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SystemUsers } from './system-users.ts';

let dir: string;
const passwd = (): string => join(dir, 'passwd');
const group = (): string => join(dir, 'group');

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'system-users-'));
  writeFileSync(passwd(), 'root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n');
  writeFileSync(group(), 'root:x:0:\nuser:x:1000:\nsudo:x:27:user\n');
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('SystemUsers cache', () => {
  it('parses users with their supplementary groups', () => {
    const users = new SystemUsers(passwd(), group());
    expect(users.lookup('user')).toEqual({ name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash', groups: [1000, 27] });
    expect(users.groupName(27)).toBe('sudo');
    expect(users.userName(4242)).toBe('4242');
  });

  it('sees an in-place rewrite immediately, even within the same millisecond', () => {
    const users = new SystemUsers(passwd(), group());
    expect(users.lookup('alice')).toBeUndefined();
    for (let i = 0; i < 20; i++) {
      writeFileSync(passwd(), `root:x:0:0:root:/root:/bin/bash\nalice:x:${2000 + i}:1000::/home/alice:/bin/sh\n`);
      expect(users.lookup('alice')?.uid).toBe(2000 + i);
    }
  });

  it('trusts an unchanged stat once the files are older than the timestamp granularity', () => {
    const old = new Date(Date.now() - 60_000);
    utimesSync(passwd(), old, old);
    utimesSync(group(), old, old);
    const users = new SystemUsers(passwd(), group());
    expect(users.lookup('user')?.uid).toBe(1000);
    // Same size, same mtime put back: only a content read could tell, and a quiet file is not re-read.
    writeFileSync(passwd(), 'root:x:0:0:root:/root:/bin/bash\nuser:x:1001:1000::/home/user:/bin/bash\n');
    utimesSync(passwd(), old, old);
    // ctime moved with the write, so the stat differs and the change is seen.
    expect(users.lookup('user')?.uid).toBe(1001);
  });

  it('sees a file replaced by rename (useradd, vipw) and a group change', () => {
    const users = new SystemUsers(passwd(), group());
    expect(users.lookup('user')?.groups).toEqual([1000, 27]);
    writeFileSync(join(dir, 'group.new'), 'root:x:0:\nuser:x:1000:\nsudo:x:27:user\ndocker:x:999:user\n');
    renameSync(join(dir, 'group.new'), group());
    expect(users.lookup('user')?.groups).toEqual([1000, 27, 999]);
  });

  it('answers no users while the files are missing and recovers when they return', () => {
    const users = new SystemUsers(passwd(), group());
    expect(users.lookup('user')).toBeDefined();
    rmSync(passwd());
    expect(users.lookup('user')).toBeUndefined();
    writeFileSync(passwd(), 'user:x:1001:1000::/home/u:/bin/bash\n');
    expect(users.lookup('user')?.uid).toBe(1001);
  });
});
