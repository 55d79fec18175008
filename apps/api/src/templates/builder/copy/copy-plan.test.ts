import { describe, expect, it } from 'vitest';
import { type ArchiveEntry, checkArchiveSafety, normalizeEntryPath, UnsafeArchiveError } from './archive-entries.ts';
import { type CopyRequest, CopySourceError, directoryModeFor, planCopy } from './copy-plan.ts';

function file(path: string, mode = 0o644): ArchiveEntry {
  return { path, kind: 'file', mode, size: 3, mtime: undefined };
}
function dir(path: string, mode = 0o755): ArchiveEntry {
  return { path, kind: 'directory', mode, size: 0, mtime: undefined };
}
function symlink(path: string, target: string): ArchiveEntry {
  return { path, kind: 'symlink', mode: 0o777, size: 0, mtime: undefined, linkTarget: target };
}

const ARCHIVE: ArchiveEntry[] = [dir('app'), file('app/a.txt'), dir('app/sub'), file('app/sub/b.txt'), file('req.txt'), file('notes.md'), file('x.txt')];

function plan(request: Partial<CopyRequest> & { src: string; dest: string }, entries = ARCHIVE) {
  return planCopy(entries, { destIsDirectory: false, resolveSymlinks: false, ...request });
}
const paths = (p: ReturnType<typeof plan>) => p.entries.map((e) => `${e.kind[0]}:${e.path}`);

describe('planCopy', () => {
  it('merges a directory’s contents into dest', () => {
    const p = plan({ src: 'app', dest: '/srv/app' });
    expect(p.root).toBe('/srv/app');
    expect(paths(p)).toEqual(['f:/srv/app/a.txt', 'd:/srv/app/sub', 'f:/srv/app/sub/b.txt']);
    expect(plan({ src: './app/', dest: '/srv/app/' }).entries.map((e) => e.path)).toEqual(['/srv/app/a.txt', '/srv/app/sub', '/srv/app/sub/b.txt']);
  });

  it('copies a file to dest, or into dest when dest ends with / or is a directory', () => {
    expect(paths(plan({ src: 'req.txt', dest: '/app/requirements.txt' }))).toEqual(['f:/app/requirements.txt']);
    expect(plan({ src: 'req.txt', dest: '/app/requirements.txt' }).root).toBe('/app');
    expect(paths(plan({ src: 'req.txt', dest: '/app/' }))).toEqual(['f:/app/req.txt']);
    expect(paths(plan({ src: 'req.txt', dest: '/app', destIsDirectory: true }))).toEqual(['f:/app/req.txt']);
  });

  it('copies every glob match into dest as a directory, a matched directory by its contents', () => {
    expect(paths(plan({ src: '*.txt', dest: '/data' }))).toEqual(['f:/data/req.txt', 'f:/data/x.txt']);
    expect(paths(plan({ src: 'ap*', dest: '/data/' }))).toEqual(['f:/data/a.txt', 'd:/data/sub', 'f:/data/sub/b.txt']);
    expect(paths(plan({ src: '**/b.txt', dest: '/data/' }))).toEqual(['f:/data/b.txt']);
    // a glob matching one file follows the file rule
    expect(paths(plan({ src: '*.md', dest: '/data/readme.md' }))).toEqual(['f:/data/readme.md']);
  });

  it('copies the whole context for . and accepts directories without their own entry', () => {
    expect(plan({ src: '.', dest: '/ctx' }).entries).toHaveLength(ARCHIVE.length);
    const p = plan({ src: 'lib', dest: '/l' }, [file('lib/deep/x.js')]);
    expect(paths(p)).toEqual(['f:/l/deep/x.js']);
    expect(p.implicitDirectories).toEqual(['/l/deep']);
  });

  it('fails clearly when the source is not among the uploaded files', () => {
    expect(() => plan({ src: 'missing', dest: '/x' })).toThrow(CopySourceError);
    expect(() => plan({ src: '*.py', dest: '/x/' })).toThrow(/matches none/);
  });

  it('applies --chmod to files, and to directories with x where r is set', () => {
    const p = plan({ src: 'app', dest: '/a', mode: 0o640 });
    expect(p.entries.map((e) => [e.path, e.mode.toString(8)])).toEqual([
      ['/a/a.txt', '640'],
      ['/a/sub', '750'],
      ['/a/sub/b.txt', '640'],
    ]);
    expect(directoryModeFor(0o644).toString(8)).toBe('755');
    expect(plan({ src: 'app', dest: '/a' }).entries[1].mode.toString(8)).toBe('755');
  });

  it('keeps symlinks, or copies what they point to with resolveSymlinks', () => {
    const entries = [dir('p'), file('p/real.txt'), symlink('p/link.txt', 'real.txt'), dir('p/d'), file('p/d/in.txt'), symlink('p/dl', 'd')];
    expect(paths(plan({ src: 'p', dest: '/x' }, entries))).toEqual(['f:/x/real.txt', 's:/x/link.txt', 'd:/x/d', 'f:/x/d/in.txt', 's:/x/dl']);
    const resolved = plan({ src: 'p', dest: '/x', resolveSymlinks: true }, entries);
    expect(paths(resolved)).toEqual(['f:/x/real.txt', 'f:/x/link.txt', 'd:/x/d', 'f:/x/d/in.txt', 'd:/x/dl', 'f:/x/dl/in.txt']);
    expect(resolved.entries[1].source).toBe('p/real.txt');
    expect(() => plan({ src: 'p', dest: '/x', resolveSymlinks: true }, [dir('p'), symlink('p/loop', '..')])).toThrow(/own parent/);
  });

  it('keeps symlinks that leave the uploaded files or dangle as they are, with or without resolveSymlinks', () => {
    const entries = [dir('f'), file('f/test.txt'), symlink('f/abs', '/etc/hostname'), symlink('f/up', '../../outside'), symlink('f/dangling', '12345test.txt'), symlink('f/via', 'up')];
    const kept = ['f:/x/test.txt', 's:/x/abs', 's:/x/up', 's:/x/dangling', 's:/x/via'];
    for (const resolveSymlinks of [false, true]) {
      const p = plan({ src: 'f', dest: '/x', resolveSymlinks }, entries);
      expect(paths(p)).toEqual(kept);
      expect(p.entries.filter((e) => e.kind === 'symlink').map((e) => e.linkTarget)).toEqual(['/etc/hostname', '../../outside', '12345test.txt', 'up']);
      // A glob and a literal source naming the link itself: the link, never what it points to.
      expect(paths(plan({ src: 'f/*', dest: '/g/', resolveSymlinks }, entries))).toEqual(kept.map((k) => k.replace('/x/', '/g/')));
      expect(plan({ src: 'f/abs', dest: '/l', resolveSymlinks }, entries).entries).toMatchObject([{ path: '/l', kind: 'symlink', linkTarget: '/etc/hostname' }]);
    }
  });

  it('maps hard links to the destination of their target', () => {
    const entries: ArchiveEntry[] = [file('h/a'), { path: 'h/b', kind: 'hardlink', mode: 0o644, size: 0, mtime: undefined, linkTarget: 'h/a' }];
    const p = plan({ src: 'h', dest: '/y' }, entries);
    expect(p.entries[1]).toMatchObject({ kind: 'hardlink', path: '/y/b', linkTarget: '/y/a' });
    // the target is not copied: the link becomes a copy of it
    const only = plan({ src: 'h/b', dest: '/z' }, entries);
    expect(only.entries[0]).toMatchObject({ kind: 'file', path: '/z', source: 'h/a' });
  });
});

describe('archive safety', () => {
  it('refuses absolute paths and ..', () => {
    expect(() => normalizeEntryPath('/etc/passwd')).toThrow(UnsafeArchiveError);
    expect(() => normalizeEntryPath('a/../../etc')).toThrow(/leaves the context/);
    expect(normalizeEntryPath('./a//b/')).toBe('a/b');
    expect(normalizeEntryPath('./')).toBeUndefined();
  });

  it('accepts symlinks pointing anywhere, but refuses entries written through a symlink', () => {
    expect(() => checkArchiveSafety([symlink('l', '/etc'), symlink('a/l', '../../etc'), symlink('d', 'missing')])).not.toThrow();
    expect(() => checkArchiveSafety([symlink('l', 'sub'), file('l/x')])).toThrow(/under the symlink/);
    expect(() => checkArchiveSafety([symlink('l', '/etc'), file('l/passwd')])).toThrow(/'l\/passwd' lies under the symlink 'l'/);
    expect(() => checkArchiveSafety([dir('a'), symlink('a/up', '../..'), dir('a/up/b'), file('a/up/b/x')])).toThrow(/under the symlink 'a\/up'/);
    expect(() => checkArchiveSafety([dir('l'), symlink('l', '/etc'), file('l/x')])).toThrow(/under the symlink/);
    expect(() => checkArchiveSafety([{ path: 'h', kind: 'hardlink', mode: 0, size: 0, mtime: undefined, linkTarget: 'nothing' }])).toThrow(/hard link/);
    expect(() => checkArchiveSafety([dir('a'), symlink('a/l', '../b'), file('b')])).not.toThrow();
  });
});
