import { mkdirSync, mkdtempSync, lstatSync, rmSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { entryTypeOf, toEntryStat } from './entry-stat.ts';

const dir = mkdtempSync(join(tmpdir(), 'entry-stat-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('toEntryStat', () => {
  it('maps a file: permission bits only, size, ids and RFC 3339 times', () => {
    const file = join(dir, 'f.txt');
    writeFileSync(file, 'hello');
    chmodSync(file, 0o4640);
    const entry = toEntryStat(lstatSync(file), 'f.txt', '/f.txt');
    expect(entry).toMatchObject({ name: 'f.txt', type: 'file', path: '/f.txt', size: 5, mode: 0o4640, uid: process.getuid?.(), gid: process.getgid?.() });
    for (const key of ['atime', 'mtime', 'ctime'] as const) {
      expect(entry[key]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(new Date(entry[key]).getTime()).not.toBeNaN();
    }
    expect(entry).not.toHaveProperty('target');
  });

  it('maps directories, links (with their target) and special files', () => {
    mkdirSync(join(dir, 'd'), { mode: 0o750 });
    symlinkSync('/etc/passwd', join(dir, 'l'));
    execFileSync('mkfifo', [join(dir, 'p')]);
    expect(toEntryStat(lstatSync(join(dir, 'd')), 'd', '/d')).toMatchObject({ type: 'directory', mode: 0o750 });
    expect(toEntryStat(lstatSync(join(dir, 'l')), 'l', '/l', '/etc/passwd')).toMatchObject({ type: 'symlink', target: '/etc/passwd' });
    expect(entryTypeOf(lstatSync(join(dir, 'p')))).toBe('unknown');
    expect(toEntryStat(lstatSync(join(dir, 'd')), 'd', '/d', 'ignored')).not.toHaveProperty('target');
  });
});
