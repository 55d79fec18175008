import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { BuildState } from './build-state.ts';
import { parseEnvArgs, workdirOf } from './config-steps.ts';
import { absoluteIn } from './container-paths.ts';
import { scanArchive, UnsafeArchiveError } from './copy/archive-entries.ts';
import { parseCopyMode } from './copy-step.ts';

function tarOf(entries: Array<{ name: string; type?: 'file' | 'directory' | 'symlink' | 'fifo'; linkname?: string }>): Readable {
  const pack = tar.pack();
  for (const e of entries) pack.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname }, e.type === undefined || e.type === 'file' ? 'x' : '');
  pack.finalize();
  return pack as unknown as Readable;
}

describe('step arguments', () => {
  it('parses ENV pairs, expanding against the variables set before the step', () => {
    const lookup = (name: string) => ({ A: 'old' })[name];
    expect(parseEnvArgs(['A', 'new', 'B', '$A'], lookup)).toEqual({ A: 'new', B: 'old' });
    expect(() => parseEnvArgs(['A'], lookup)).toThrow(/pairs/);
    expect(() => parseEnvArgs(['A=B', '1'], lookup)).toThrow(/not a valid variable name/);
  });

  it('resolves WORKDIR against the current one and expands variables', () => {
    const state = new BuildState({ user: 'user', workdir: '/home/user', envs: { APP: '/srv/app' }, startCmd: null, readyCmd: null }, []);
    expect(workdirOf(state, 'sub')).toBe('/home/user/sub');
    expect(workdirOf(state, '$APP/../x/')).toBe('/srv/x');
    expect(() => workdirOf(state, ' ')).toThrow(/needs a path/);
  });

  it('reads COPY modes and destinations', () => {
    expect(parseCopyMode('')).toBeUndefined();
    expect(parseCopyMode('0644')).toBe(0o644);
    expect(parseCopyMode('755')).toBe(0o755);
    expect(() => parseCopyMode('rw-r--r--')).toThrow(/octal/);
    expect(absoluteIn('/app', 'dist/')).toBe('/app/dist/');
    expect(absoluteIn(null, 'x')).toBe('/x');
    expect(absoluteIn('/app', '/etc/conf')).toBe('/etc/conf');
    expect(absoluteIn('/app', '.')).toBe('/app');
  });

  it('keeps image env below ENV steps and leaves per-user variables to envd', () => {
    const state = new BuildState({ user: 'user', workdir: null, envs: { A: '1' }, startCmd: null, readyCmd: null }, ['PATH=/bin', 'HOME=/root', 'A=0', 'LANG=C']);
    expect(state.runEnv()).toEqual({ PATH: '/bin', A: '1', LANG: 'C' });
    expect(state.defaults('s', null)).toEqual({ user: 'user', workdir: null, envs: { A: '1' }, startCmd: 's', readyCmd: null });
  });
});

describe('scanArchive', () => {
  it('lists entries of a real tar', async () => {
    const entries = await scanArchive(tarOf([{ name: './', type: 'directory' }, { name: './a/', type: 'directory' }, { name: './a/f.txt' }, { name: 'a/l', type: 'symlink', linkname: 'f.txt' }]));
    expect(entries.map((e) => [e.path, e.kind])).toEqual([
      ['a', 'directory'],
      ['a/f.txt', 'file'],
      ['a/l', 'symlink'],
    ]);
  });

  it('refuses entries that escape, devices and garbage', async () => {
    await expect(scanArchive(tarOf([{ name: 'a/../../etc/passwd' }]))).rejects.toThrow(UnsafeArchiveError);
    await expect(scanArchive(tarOf([{ name: 'pipe', type: 'fifo' }]))).rejects.toThrow(/fifo/);
    await expect(scanArchive(Readable.from([Buffer.from('not a tar archive at all'.repeat(40))]))).rejects.toThrow(UnsafeArchiveError);
  });
});
