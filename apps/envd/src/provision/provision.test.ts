import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SystemUsers } from '../identity/system-users.ts';
import { provisionRootFilesystem } from './provision.ts';

const asRoot = process.getuid?.() === 0;
let root: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'tidepool-provision-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** Writes files (and, for `-> target` values, symlinks) under the temporary root. */
function layout(files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    const host = join(root, path);
    mkdirSync(dirname(host), { recursive: true });
    if (content.startsWith('-> ')) symlinkSync(content.slice(3), host);
    else writeFileSync(host, content);
  }
}

const read = (path: string): string => readFileSync(join(root, path), 'utf8');
const mode = (path: string): number => statSync(join(root, path)).mode & 0o7777;
const provision = () => provisionRootFilesystem({ root });
const RUNTIME = { 'opt/tidepool/bin/bash': '#!fake bash' };

describe('a busybox-only root filesystem', () => {
  beforeEach(() => {
    layout({
      ...RUNTIME,
      'bin/busybox': '',
      'bin/sh': '-> busybox',
      'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n',
      'etc/group': 'root:x:0:\n',
    });
  });

  it('gets the sandbox user, its home, /bin/bash, /tmp and /home', () => {
    const report = provision();
    expect(report.warnings).toEqual([]);
    expect(report.changes).toEqual(['/tmp 1777', '/home 755', '/root 700', 'user user 1000:1000', 'home /home/user', '/bin/bash -> /opt/tidepool/bin/bash']);
    expect(read('etc/passwd')).toBe('root:x:0:0:root:/root:/bin/sh\nuser:*:1000:1000::/home/user:/bin/bash\n');
    expect(read('etc/group')).toBe('root:x:0:\nuser:*:1000:\n');
    expect(readlinkSync(join(root, 'bin/bash'))).toBe('/opt/tidepool/bin/bash');
    expect(readlinkSync(join(root, 'bin/sh'))).toBe('busybox');
    expect(mode('tmp')).toBe(0o1777);
    expect(mode('home/user')).toBe(0o755);
    if (asRoot) expect(statSync(join(root, 'home/user'))).toMatchObject({ uid: 1000, gid: 1000 });
  });

  it('is what envd reads users from', () => {
    provision();
    const users = new SystemUsers(join(root, 'etc/passwd'), join(root, 'etc/group'));
    expect(users.lookup('user')).toMatchObject({ uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash', groups: [1000] });
    expect(users.lookup('root')).toMatchObject({ uid: 0, gid: 0 });
  });

  it('changes nothing the second time', () => {
    provision();
    const passwd = read('etc/passwd');
    expect(provision().changes).toEqual([]);
    expect(read('etc/passwd')).toBe(passwd);
  });

  it('does not touch an image without sudo for sudo', () => {
    provision();
    expect(() => lstatSync(join(root, 'etc/sudoers.d'))).toThrow();
  });
});

describe('an empty root filesystem', () => {
  it('gets root, the sandbox user and both shells', () => {
    layout(RUNTIME);
    const report = provision();
    expect(report.changes).toEqual(expect.arrayContaining(['group root', 'user root', 'user user 1000:1000', '/bin/sh -> bash']));
    expect(read('etc/passwd')).toBe('root:*:0:0:root:/root:/bin/sh\nuser:*:1000:1000::/home/user:/bin/bash\n');
    expect(mode('etc/passwd')).toBe(0o644);
    expect(readlinkSync(join(root, 'bin/sh'))).toBe('bash');
    expect(provision().changes).toEqual([]);
  });

  it('warns when the runtime is not in the image', () => {
    expect(provision().warnings).toEqual([expect.stringContaining('/opt/tidepool/bin/bash is missing')]);
  });
});

describe('a Debian-like root filesystem with sudo', () => {
  beforeEach(() => {
    layout({
      ...RUNTIME,
      'bin': '-> usr/bin',
      'usr/bin/bash': '',
      'usr/bin/sh': '-> dash',
      'usr/bin/sudo': '',
      'etc/passwd': 'root:x:0:0:root:/root:/bin/bash\n_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n',
      'etc/group': 'root:x:0:\nsudo:x:27:\n',
      'etc/shadow': 'root:*:19000:0:99999:7:::\n',
      'etc/gshadow': 'root:*::\nsudo:*::\n',
      'etc/sudoers': 'Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n',
      'etc/shells': '/bin/bash\n',
      'etc/skel/.bashrc': 'export PS1=x\n',
      'etc/skel/.config/app.conf': 'a=1\n',
    });
    chmodSync(join(root, 'etc/shadow'), 0o640);
  });

  it('adds shadow entries, passwordless sudo and the skeleton, keeping the image shells', () => {
    const report = provision();
    expect(report.changes).toEqual(expect.arrayContaining(['sudo for user', '/etc/sudoers includes /etc/sudoers.d', 'user in group sudo', '/bin/sh -> bash']));
    expect(report.changes.join()).not.toContain('/bin/bash');
    expect(read('etc/passwd')).toContain('\nuser:x:1000:1000::/home/user:/bin/bash\n');
    expect(read('etc/shadow')).toBe('root:*:19000:0:99999:7:::\nuser:*::0:99999:7:::\n');
    expect(mode('etc/shadow')).toBe(0o640);
    expect(read('etc/gshadow')).toBe('root:*::\nsudo:*::user\nuser:*::\n');
    expect(read('etc/group')).toBe('root:x:0:\nsudo:x:27:user\nuser:x:1000:\n');
    expect(read('etc/sudoers.d/90-tidepool-user')).toBe('user ALL=(ALL:ALL) NOPASSWD: ALL\n');
    expect(mode('etc/sudoers.d/90-tidepool-user')).toBe(0o440);
    expect(read('etc/sudoers')).toBe('Defaults env_reset\nroot ALL=(ALL:ALL) ALL\n#includedir /etc/sudoers.d\n');
    expect(read('home/user/.config/app.conf')).toBe('a=1\n');
    // /bin/sh was a dangling link to dash: it now leads to the image's own bash.
    expect(readlinkSync(join(root, 'usr/bin/sh'))).toBe('bash');
    expect(read('etc/shells')).toBe('/bin/bash\n/bin/sh\n');
    if (asRoot) expect(statSync(join(root, 'home/user/.config/app.conf'))).toMatchObject({ uid: 1000, gid: 1000 });
    expect(provision().changes).toEqual([]);
  });

  it('leaves a sudoers that already reads sudoers.d alone', () => {
    writeFileSync(join(root, 'etc/sudoers'), 'root ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n');
    provision();
    expect(read('etc/sudoers')).toBe('root ALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n');
  });
});

describe('images that already have accounts', () => {
  it('takes the next free ids when 1000 belongs to someone else, and says so', () => {
    layout({ ...RUNTIME, 'bin/bash': '', 'etc/passwd': 'root:x:0:0::/root:/bin/bash\nubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n', 'etc/group': 'root:x:0:\nubuntu:x:1000:\n' });
    const report = provision();
    expect(report.changes).toContain('user user 1001:1001');
    expect(report.warnings).toEqual(["gid 1000 belongs to group 'ubuntu'; group user gets gid 1001", "uid 1000 belongs to 'ubuntu'; user gets uid 1001"]);
    expect(read('etc/passwd')).toContain('user:*:1001:1001::/home/user:/bin/bash');
  });

  it('keeps an existing `user` and only gives it its home directory back', () => {
    layout({ ...RUNTIME, 'bin/bash': '', 'etc/passwd': 'root:x:0:0::/root:/bin/bash\nuser:x:1000:100::/home/user:/bin/sh\n', 'etc/group': 'root:x:0:\nusers:x:100:\n' });
    mkdirSync(join(root, 'home/user'), { recursive: true }); // as a Dockerfile's WORKDIR leaves it: root's
    const report = provision();
    expect(read('etc/passwd')).toBe('root:x:0:0::/root:/bin/bash\nuser:x:1000:100::/home/user:/bin/sh\n');
    expect(read('etc/group')).toBe('root:x:0:\nusers:x:100:\n');
    if (asRoot) {
      expect(report.changes).toContain('owner of /home/user');
      expect(statSync(join(root, 'home/user'))).toMatchObject({ uid: 1000, gid: 100 });
    }
    expect(provision().changes).toEqual([]);
  });

  it('makes an existing /tmp world-writable and sticky', () => {
    layout({ ...RUNTIME, 'bin/bash': '', 'etc/passwd': 'root:x:0:0::/root:/bin/bash\n' });
    mkdirSync(join(root, 'tmp'), { mode: 0o755 });
    chmodSync(join(root, 'tmp'), 0o755);
    expect(provision().changes).toContain('/tmp 1777');
    expect(mode('tmp')).toBe(0o1777);
  });
});
