import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RootFilesystem } from './root-filesystem.ts';

let root: string;
let fs: RootFilesystem;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'tidepool-rootfs-'));
  fs = new RootFilesystem(root, false);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('RootFilesystem.resolve', () => {
  it('resolves relative and absolute symlinks inside the root, never on the host', () => {
    mkdirSync(join(root, 'usr/bin'), { recursive: true });
    writeFileSync(join(root, 'usr/bin/dash'), '');
    symlinkSync('usr/bin', join(root, 'bin'));
    symlinkSync('/bin/dash', join(root, 'usr/bin/sh'));
    expect(fs.resolve('/bin/sh')).toBe(join(root, 'usr/bin/dash'));
    expect(fs.resolve('/bin/sh', false)).toBe(join(root, 'usr/bin/sh'));
    expect(fs.exists('/bin/sh')).toBe(true);
  });

  it('treats an absolute link to a host path as a path inside the root', () => {
    symlinkSync('/etc/passwd', join(root, 'passwd-link'));
    expect(fs.resolve('/passwd-link')).toBe(join(root, 'etc/passwd'));
    expect(fs.exists('/passwd-link')).toBe(false);
  });

  it('keeps `..` from leaving the root and reports dangling links as missing', () => {
    symlinkSync('../../../../nowhere', join(root, 'up'));
    expect(fs.resolve('/up')).toBe(join(root, 'nowhere'));
    expect(fs.resolve('/../../etc')).toBe(join(root, 'etc'));
    expect(fs.exists('/up')).toBe(false);
    expect(fs.lstat('/up')?.isSymbolicLink()).toBe(true);
  });

  it('gives up on symlink loops', () => {
    symlinkSync('b', join(root, 'a'));
    symlinkSync('a', join(root, 'b'));
    expect(() => fs.resolve('/a')).toThrow(/too many levels/);
  });
});

describe('RootFilesystem writes', () => {
  it('replaces a file atomically and keeps its mode', () => {
    mkdirSync(join(root, 'etc'));
    writeFileSync(join(root, 'etc/shadow'), 'old\n', { mode: 0o640 });
    fs.writeText('/etc/shadow', 'new\n');
    expect(readFileSync(join(root, 'etc/shadow'), 'utf8')).toBe('new\n');
    expect(statSync(join(root, 'etc/shadow')).mode & 0o777).toBe(0o640);
  });

  it('creates directories with their exact mode and links through usr-merged /bin', () => {
    fs.makeDirectory('/tmp', 0o1777);
    expect(statSync(join(root, 'tmp')).mode & 0o7777).toBe(0o1777);
    mkdirSync(join(root, 'usr/bin'), { recursive: true });
    symlinkSync('usr/bin', join(root, 'bin'));
    fs.symlink('/bin/bash', '/opt/tidepool/bin/bash');
    expect(fs.lstat('/usr/bin/bash')?.isSymbolicLink()).toBe(true);
  });
});
