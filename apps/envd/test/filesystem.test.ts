import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { chmodSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Filesystem } from '@tidepool/protocol/filesystem';
import { FileNotFoundError, InvalidArgumentError, Sandbox } from 'e2b';
import { setAttribute } from 'fs-xattr';
import { describe, expect, it } from 'vitest';
import { useSdkSession } from './support/sdk-session.ts';
import type { RunningEnvd } from './support/start-envd.ts';

let envd: RunningEnvd;
let sbx: Sandbox;
let dir: string;

useSdkSession('envd-fs-', (session) => ({ envd, sbx, dir } = session));

const until = async (check: () => boolean, timeoutMs = 5000): Promise<void> => {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe('filesystem via the e2b SDK', () => {
  it('lists with depth, with types, sizes, owners and permissions', async () => {
    const root = join(dir, 'list');
    mkdirSync(join(root, 'a/b'), { recursive: true });
    writeFileSync(join(root, 'top.txt'), 'hello');
    writeFileSync(join(root, 'a/inner.txt'), 'x');
    writeFileSync(join(root, 'a/b/deep.txt'), 'y');
    symlinkSync(join(root, 'top.txt'), join(root, 'link'));
    const shallow = await sbx.files.list(root);
    expect(shallow.map((e) => e.name).sort()).toEqual(['a', 'link', 'top.txt']);
    const top = shallow.find((e) => e.name === 'top.txt')!;
    expect(top).toMatchObject({ type: 'file', size: 5, path: join(root, 'top.txt'), owner: 'root', group: 'root', permissions: '-rw-r--r--' });
    // A symlink reports its target's type (as the reference does), the link itself in symlinkTarget.
    const link = shallow.find((e) => e.name === 'link')!;
    expect(link.type).toBe('file');
    expect(link.symlinkTarget).toBe(join(root, 'top.txt'));
    const deep = await sbx.files.list(root, { depth: 3 });
    expect(deep.map((e) => e.path)).toContain(join(root, 'a/b/deep.txt'));
    expect((await sbx.files.list(root, { depth: 2 })).map((e) => e.path)).not.toContain(join(root, 'a/b/deep.txt'));
  });

  it('stats, reports existence and metadata from xattrs', async () => {
    const file = join(dir, 'meta.txt');
    writeFileSync(file, 'm');
    await setAttribute(file, 'user.e2b.owner-team', 'blue');
    const info = await sbx.files.getInfo(file);
    expect(info).toMatchObject({ name: 'meta.txt', type: 'file', size: 1 });
    expect(info.metadata).toEqual({ 'owner-team': 'blue' });
    expect(info.modifiedTime?.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await sbx.files.exists(file)).toBe(true);
    expect(await sbx.files.exists(join(dir, 'nope'))).toBe(false);
    await expect(sbx.files.getInfo(join(dir, 'nope'))).rejects.toBeInstanceOf(FileNotFoundError);
  });

  it('makes directories with parents, renames and removes', async () => {
    const target = join(dir, 'mk/x/y');
    expect(await sbx.files.makeDir(target)).toBe(true);
    expect(await sbx.files.makeDir(target)).toBe(false);
    writeFileSync(join(target, 'f'), 'data');
    const moved = await sbx.files.rename(join(target, 'f'), join(dir, 'mk/moved/f2'));
    expect(moved).toMatchObject({ name: 'f2', type: 'file', path: join(dir, 'mk/moved/f2') });
    await sbx.files.remove(join(dir, 'mk'));
    expect(await sbx.files.exists(join(dir, 'mk'))).toBe(false);
    await sbx.files.remove(join(dir, 'mk'));
    await expect(sbx.files.rename(join(dir, 'missing'), join(dir, 'other'))).rejects.toBeInstanceOf(FileNotFoundError);
  });

  it('watches a tree recursively, including directories created later, with entries', async () => {
    const root = join(dir, 'watch');
    mkdirSync(root);
    const events: Array<{ name: string; type: string; size?: number }> = [];
    const handle = await sbx.files.watchDir(root, (e) => void events.push({ name: e.name, type: e.type, size: e.entry?.size }), { recursive: true, includeEntry: true, timeoutMs: 0 });
    writeFileSync(join(root, 'a.txt'), 'abc');
    mkdirSync(join(root, 'sub'));
    await until(() => events.some((e) => e.name === 'sub' && e.type === 'create'));
    await new Promise((r) => setTimeout(r, 100));
    writeFileSync(join(root, 'sub/inner.txt'), 'zz');
    rmSync(join(root, 'a.txt'));
    await until(() => events.some((e) => e.name === 'sub/inner.txt' && e.type === 'write') && events.some((e) => e.name === 'a.txt' && e.type === 'remove'));
    expect(events.find((e) => e.name === 'a.txt' && e.type === 'create')).toBeDefined();
    expect(events.some((e) => e.name === 'sub/inner.txt' && e.size === 2)).toBe(true);
    await handle.stop();
  });

  it('refuses to watch a missing path or a file', async () => {
    await expect(sbx.files.watchDir(join(dir, 'missing'), () => undefined)).rejects.toThrow();
    writeFileSync(join(dir, 'plain'), '');
    await expect(sbx.files.watchDir(join(dir, 'plain'), () => undefined)).rejects.toThrow(/not a directory/);
  });
});

describe('filesystem via raw Connect', () => {
  for (const useBinaryFormat of [false, true]) {
    it(`polling watchers and error codes (${useBinaryFormat ? 'binary' : 'json'})`, async () => {
      const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat }));
      const root = join(dir, `poll-${useBinaryFormat}`);
      mkdirSync(root);
      const { watcherId } = await client.createWatcher({ path: root, recursive: false, includeEntry: true });
      expect(watcherId).toMatch(/^w[a-z0-9]{20}$/);
      writeFileSync(join(root, 'n.txt'), 'n');
      let events: Awaited<ReturnType<typeof client.getWatcherEvents>>['events'] = [];
      const end = Date.now() + 5000;
      while (events.length === 0 && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 50));
        events = (await client.getWatcherEvents({ watcherId })).events;
      }
      expect(events[0]).toMatchObject({ name: 'n.txt', type: 1 });
      expect(events[0].entry?.name).toBe('n.txt');
      expect((await client.getWatcherEvents({ watcherId })).events.length).toBeLessThan(5);
      await client.removeWatcher({ watcherId });
      await expect(client.getWatcherEvents({ watcherId })).rejects.toMatchObject({ code: 5 });
      await expect(client.stat({ path: join(root, 'none') })).rejects.toMatchObject({ code: 5 });
      await expect(client.listDir({ path: join(root, 'n.txt') })).rejects.toMatchObject({ code: 3 });
      await expect(client.makeDir({ path: root })).rejects.toMatchObject({ code: 6 });
      await expect(client.stat({ path: root }, { headers: { authorization: `Basic ${Buffer.from('no-such-user:').toString('base64')}` } })).rejects.toMatchObject({ code: 16 });
      const entry = (await client.stat({ path: '~' })).entry;
      expect(entry?.path).toBe('/root');
    });
  }
});

describe('filesystem semantics', () => {
  it('surfaces xattr metadata in list and reports symlinks with their target mode and size', async () => {
    const root = join(dir, 'semantics');
    mkdirSync(join(root, 'd'), { recursive: true });
    chmodSync(join(root, 'd'), 0o755);
    writeFileSync(join(root, 'f.txt'), 'twelve bytes');
    chmodSync(join(root, 'f.txt'), 0o640);
    await setAttribute(join(root, 'f.txt'), 'user.e2b.kind', 'report');
    await setAttribute(join(root, 'f.txt'), 'user.other', 'ignored');
    symlinkSync('f.txt', join(root, 'rel-link'));
    symlinkSync(join(root, 'nowhere'), join(root, 'broken'));
    const entries = await sbx.files.list(root);
    const byName = new Map(entries.map((e) => [e.name, e]));
    expect(byName.get('f.txt')?.metadata).toEqual({ kind: 'report' });
    expect(byName.get('d')).toMatchObject({ type: 'dir', permissions: 'drwxr-xr-x', mode: 0o755 });
    expect(byName.get('d')?.metadata).toBeUndefined();
    expect(byName.get('rel-link')).toMatchObject({ type: 'file', size: 12, mode: 0o640, permissions: 'Lrwxrwxrwx', symlinkTarget: join(root, 'f.txt') });
    expect(await sbx.files.getInfo(join(root, 'rel-link'))).toMatchObject({ type: 'file', size: 12, symlinkTarget: join(root, 'f.txt') });
    // A dangling link has no target type (UNSPECIFIED): the SDK's list skips it, getInfo gives no type.
    expect(byName.has('broken')).toBe(false);
    const broken = await sbx.files.getInfo(join(root, 'broken'));
    expect(broken.type).toBeUndefined();
    expect(broken).toMatchObject({ name: 'broken', permissions: 'Lrwxrwxrwx', symlinkTarget: join(root, 'nowhere') });
    expect((await sbx.files.getInfo(join(root, 'f.txt'))).permissions).toBe('-rw-r-----');
  });

  it('follows a symlinked list root but no nested symlinks, reporting paths under the requested path', async () => {
    const real = join(dir, 'real-root');
    mkdirSync(join(real, 'inner'), { recursive: true });
    writeFileSync(join(real, 'inner/file'), 'x');
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'secret'), 's');
    symlinkSync(outside, join(real, 'to-outside'));
    symlinkSync(real, join(dir, 'root-link'));
    const listed = await sbx.files.list(join(dir, 'root-link'), { depth: 5 });
    expect(listed.map((e) => e.path).sort()).toEqual([join(dir, 'root-link/inner'), join(dir, 'root-link/inner/file'), join(dir, 'root-link/to-outside')]);
    // The nested link reads as the directory it points at, and still is not walked into.
    expect(listed.find((e) => e.name === 'to-outside')).toMatchObject({ type: 'dir', symlinkTarget: outside });
    expect(await sbx.files.getInfo(join(real, 'to-outside'))).toMatchObject({ type: 'dir', symlinkTarget: outside });
  });

  it('makes directories owned by the request user and refuses a file in the way', async () => {
    const base = join(dir, 'owned');
    expect(await sbx.files.makeDir(join(base, 'a/b'), { user: 'nobody' })).toBe(true);
    expect(statSync(join(base, 'a/b')).uid).toBe(65534);
    expect(statSync(base).uid).toBe(65534);
    expect(statSync(dir).uid).toBe(0);
    expect((await sbx.files.getInfo(join(base, 'a'))).owner).toBe('nobody');
    writeFileSync(join(dir, 'a-file'), '');
    await expect(sbx.files.makeDir(join(dir, 'a-file'))).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('never sends FILE_TYPE_SYMLINK over Connect JSON (clients without that enum value fail to parse it)', async () => {
    const root = join(dir, 'json-links');
    mkdirSync(join(root, 'd'), { recursive: true });
    writeFileSync(join(root, 'f'), 'abc');
    symlinkSync(join(root, 'f'), join(root, 'to-file'));
    symlinkSync(join(root, 'd'), join(root, 'to-dir'));
    symlinkSync(join(root, 'gone'), join(root, 'dangling'));
    symlinkSync(join(root, 'loop'), join(root, 'loop'));
    const call = async (method: string, body: unknown): Promise<{ status: number; text: string }> => {
      const response = await fetch(`${envd.url}/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' },
        body: JSON.stringify(body),
      });
      return { status: response.status, text: await response.text() };
    };
    const listed = await call('ListDir', { path: root, depth: 2 });
    expect(listed.status).toBe(200);
    expect(listed.text).not.toContain('FILE_TYPE_SYMLINK');
    const entries = (JSON.parse(listed.text) as { entries: Array<{ name: string; type?: string; symlinkTarget?: string; size: string }> }).entries;
    const typeOf = new Map(entries.map((e) => [e.name, [e.type ?? 'FILE_TYPE_UNSPECIFIED', e.symlinkTarget]]));
    expect(Object.fromEntries(typeOf)).toEqual({
      d: ['FILE_TYPE_DIRECTORY', undefined],
      f: ['FILE_TYPE_FILE', undefined],
      'to-file': ['FILE_TYPE_FILE', join(root, 'f')],
      'to-dir': ['FILE_TYPE_DIRECTORY', join(root, 'd')],
      dangling: ['FILE_TYPE_UNSPECIFIED', join(root, 'gone')],
      loop: ['FILE_TYPE_UNSPECIFIED', join(root, 'loop')],
    });
    expect(entries.find((e) => e.name === 'to-file')?.size).toBe('3');
    for (const [name, type] of [['to-file', 'FILE_TYPE_FILE'], ['to-dir', 'FILE_TYPE_DIRECTORY']]) {
      const stat = await call('Stat', { path: join(root, name) });
      expect(stat.status).toBe(200);
      expect(JSON.parse(stat.text).entry).toMatchObject({ name, type, permissions: 'Lrwxrwxrwx' });
    }
    const dangling = JSON.parse((await call('Stat', { path: join(root, 'dangling') })).text).entry;
    expect(dangling.type).toBeUndefined();
    expect(dangling.symlinkTarget).toBe(join(root, 'gone'));
  });

  it('maps listing, moving and path errors to Connect codes', async () => {
    const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1' }));
    const root = join(dir, 'codes');
    mkdirSync(join(root, 'sub'), { recursive: true });
    writeFileSync(join(root, 'sub/f'), '');
    writeFileSync(join(root, 'file'), '');
    symlinkSync(join(root, 'loop-b'), join(root, 'loop-a'));
    symlinkSync(join(root, 'loop-a'), join(root, 'loop-b'));
    // depth 0 means 1
    expect((await client.listDir({ path: root, depth: 0 })).entries.map((e) => e.name).sort()).toEqual(['file', 'loop-a', 'loop-b', 'sub']);
    await expect(client.listDir({ path: join(root, 'missing') })).rejects.toMatchObject({ code: 5 });
    await expect(client.listDir({ path: join(root, 'loop-a') })).rejects.toMatchObject({ code: 9 });
    await expect(client.stat({ path: '~nobody/x' })).rejects.toMatchObject({ code: 3 });
    await expect(client.move({ source: join(root, 'sub/f'), destination: join(root, 'file/under-a-file') })).rejects.toMatchObject({ code: 13 });
    const moved = await client.move({ source: join(root, 'sub'), destination: join(root, 'new/parents/sub2') });
    expect(moved.entry).toMatchObject({ name: 'sub2', type: 2, path: join(root, 'new/parents/sub2') });
    await client.remove({ path: join(root, 'does-not-exist') });
    await client.remove({ path: join(root, 'new') });
    await expect(client.stat({ path: join(root, 'new') })).rejects.toMatchObject({ code: 5 });
  });
});
