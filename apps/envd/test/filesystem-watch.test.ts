import { ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { appendFileSync, chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary, fromJson, type JsonValue, toBinary, toJson } from '@bufbuild/protobuf';
import {
  CreateWatcherRequestSchema, CreateWatcherResponseSchema, EventType, Filesystem, GetWatcherEventsRequestSchema,
  GetWatcherEventsResponseSchema, RemoveWatcherRequestSchema, RemoveWatcherResponseSchema,
} from '@tidepool/protocol/filesystem';
import { type FilesystemEvent, Sandbox } from 'e2b';
import { describe, expect, it } from 'vitest';
import { useSdkSession } from './support/sdk-session.ts';
import type { RunningEnvd } from './support/start-envd.ts';

let envd: RunningEnvd;
let sbx: Sandbox;
let dir: string;

useSdkSession('envd-watch-', (session) => ({ envd, sbx, dir } = session));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Seen {
  name: string;
  type: string;
  entry?: { type?: string; size: number; path: string };
}

/** Watches `root` through the SDK and collects `type name` strings plus the raw events. */
async function collect(root: string, opts: { recursive?: boolean; includeEntry?: boolean } = {}) {
  const events: Seen[] = [];
  const handle = await sbx.files.watchDir(
    root,
    (e: FilesystemEvent) => void events.push({ name: e.name, type: e.type, entry: e.entry && { type: e.entry.type, size: e.entry.size, path: e.entry.path } }),
    { timeoutMs: 0, ...opts },
  );
  const lines = () => events.map((e) => `${e.type} ${e.name}`);
  /** Waits until `expected` appears in order (other events may sit in between). */
  const waitFor = async (expected: string[], timeoutMs = 4000): Promise<void> => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      let at = 0;
      for (const line of lines()) if (line === expected[at]) at++;
      if (at >= expected.length) return;
      if (Date.now() > end) throw new Error(`expected ${JSON.stringify(expected)} in order, saw ${JSON.stringify(lines())}`);
      await sleep(20);
    }
  };
  return { events, lines, waitFor, stop: () => handle.stop() };
}

describe('WatchDir through the e2b SDK', () => {
  it('reports create, write, chmod, rename and remove of files, with entries where the file exists', async () => {
    const root = join(dir, 'files');
    mkdirSync(root);
    const w = await collect(root, { includeEntry: true });
    writeFileSync(join(root, 'a.txt'), 'abc');
    await w.waitFor(['create a.txt', 'write a.txt']);
    appendFileSync(join(root, 'a.txt'), 'de');
    await w.waitFor(['create a.txt', 'write a.txt', 'write a.txt']);
    chmodSync(join(root, 'a.txt'), 0o600);
    await w.waitFor(['chmod a.txt']);
    renameSync(join(root, 'a.txt'), join(root, 'b.txt'));
    await w.waitFor(['chmod a.txt', 'rename a.txt', 'create b.txt']);
    rmSync(join(root, 'b.txt'));
    await w.waitFor(['create b.txt', 'remove b.txt']);
    await sleep(100);
    await w.stop();

    const write = w.events.filter((e) => e.type === 'write' && e.name === 'a.txt').at(-1);
    expect(write?.entry).toEqual({ type: 'file', size: 5, path: join(root, 'a.txt') });
    const created = w.events.find((e) => e.type === 'create' && e.name === 'b.txt');
    expect(created?.entry?.path).toBe(join(root, 'b.txt'));
    for (const e of w.events.filter((x) => x.type === 'remove' || x.type === 'rename')) expect(e.entry).toBeUndefined();
    expect(w.lines().filter((l) => l.endsWith('b.txt'))).toEqual(['create b.txt', 'remove b.txt']);
  });

  it('keeps create before remove for a file created and deleted at once', async () => {
    const root = join(dir, 'fast');
    mkdirSync(root);
    const w = await collect(root);
    writeFileSync(join(root, 'tmp'), '');
    rmSync(join(root, 'tmp'));
    await w.waitFor(['create tmp', 'remove tmp']);
    await w.stop();
  });

  it('watches recursively, including directories created later and nested at once', async () => {
    const root = join(dir, 'tree');
    mkdirSync(join(root, 'old'), { recursive: true });
    writeFileSync(join(root, 'old/existing.txt'), 'e');
    const w = await collect(root, { recursive: true, includeEntry: true });
    mkdirSync(join(root, 'x/y/z'), { recursive: true });
    await w.waitFor(['create x', 'create x/y', 'create x/y/z']);
    writeFileSync(join(root, 'x/y/z/deep.txt'), 'deep');
    await w.waitFor(['create x/y/z/deep.txt', 'write x/y/z/deep.txt']);
    writeFileSync(join(root, 'old/existing.txt'), 'changed');
    await w.waitFor(['write old/existing.txt']);
    chmodSync(join(root, 'old'), 0o700);
    await w.waitFor(['chmod old']);
    rmSync(join(root, 'old'), { recursive: true });
    await w.waitFor(['chmod old', 'remove old/existing.txt', 'remove old']);
    renameSync(join(root, 'x'), join(root, 'x2'));
    await w.waitFor(['rename x', 'create x2']);
    writeFileSync(join(root, 'x2/y/after-move.txt'), '1');
    await w.waitFor(['create x2/y/after-move.txt']);
    await sleep(100);
    await w.stop();

    const deep = w.events.find((e) => e.type === 'write' && e.name === 'x/y/z/deep.txt');
    expect(deep?.entry).toMatchObject({ type: 'file', size: 4 });
    expect(w.events.find((e) => e.name === 'x' && e.type === 'create')?.entry?.type).toBe('dir');
    // A directory's own watch never leaks events such as `old/old`.
    expect(w.lines().some((l) => /old\/old|x\/x$/.test(l))).toBe(false);
    // A directory that still exists is never reported removed.
    expect(w.lines()).not.toContain('remove x2');
  });

  it('keeps up with a burst of files created and then removed with their directory', async () => {
    const root = join(dir, 'burst');
    mkdirSync(root);
    const w = await collect(root, { recursive: true });
    mkdirSync(join(root, 'many'));
    await w.waitFor(['create many']);
    const names = Array.from({ length: 300 }, (_, i) => `f${i}`);
    for (const name of names) writeFileSync(join(root, 'many', name), name);
    rmSync(join(root, 'many'), { recursive: true });
    await w.waitFor(['remove many'], 8000);
    await w.stop();
    for (const name of names) {
      const mine = w.lines().filter((l) => l.endsWith(`many/${name}`));
      expect(mine[0]).toBe(`create many/${name}`);
      expect(mine.at(-1)).toBe(`remove many/${name}`);
    }
    expect(w.lines().filter((l) => l.startsWith('chmod'))).toEqual([]);
  });

  it('does not report nested events without recursive', async () => {
    const root = join(dir, 'flat');
    mkdirSync(join(root, 'sub'), { recursive: true });
    const w = await collect(root);
    writeFileSync(join(root, 'sub/hidden.txt'), 'h');
    writeFileSync(join(root, 'visible.txt'), 'v');
    await w.waitFor(['create visible.txt']);
    await sleep(150);
    await w.stop();
    expect(w.lines().some((l) => l.includes('hidden'))).toBe(false);
  });

  it('stops cleanly and rejects missing paths and files', async () => {
    await expect(sbx.files.watchDir(join(dir, 'missing'), () => undefined)).rejects.toThrow(/not found/i);
    writeFileSync(join(dir, 'plain-file'), '');
    await expect(sbx.files.watchDir(join(dir, 'plain-file'), () => undefined)).rejects.toThrow(/not a directory/);
  });
});

/** What a leaked upload/compose staging file would look like in an event name. */
const STAGING = /\.(upload|compose)-[0-9a-f]{12}$/;

describe('uploads as watchers see them: the write of the target, never the staging file', () => {
  // As the reference's upload does it: chown (CHMOD) before writing; a new file is created first, an old one truncated.
  it('reports CHMOD then WRITE for an overwrite and CREATE, CHMOD, WRITE for a new file, with entries (SDK watchDir)', async () => {
    const root = join(dir, 'sdk-writes');
    mkdirSync(root);
    await sbx.files.write(join(root, 'existing.txt'), 'first');
    const w = await collect(root, { includeEntry: true });
    await sbx.files.write(join(root, 'existing.txt'), 'second');
    await w.waitFor(['chmod existing.txt', 'write existing.txt']);
    await sbx.files.write(join(root, 'new.txt'), 'new content');
    await w.waitFor(['create new.txt', 'chmod new.txt', 'write new.txt']);
    await sbx.files.write(join(root, 'empty.txt'), '');
    await w.waitFor(['create empty.txt', 'chmod empty.txt']);
    await sbx.files.writeFiles([{ path: join(root, 'new.txt'), data: 'again' }, { path: join(root, 'multi.txt'), data: 'm' }]);
    await w.waitFor(['chmod new.txt', 'write new.txt', 'create multi.txt', 'chmod multi.txt', 'write multi.txt']);
    await sleep(150);
    await w.stop();
    expect(w.lines()).toEqual([
      'chmod existing.txt', 'write existing.txt',
      'create new.txt', 'chmod new.txt', 'write new.txt',
      'create empty.txt', 'chmod empty.txt',
      'chmod new.txt', 'write new.txt', 'create multi.txt', 'chmod multi.txt', 'write multi.txt',
    ]);
    for (const event of w.events.slice(0, 2)) expect(event.entry).toEqual({ type: 'file', size: 6, path: join(root, 'existing.txt') });
    for (const event of w.events.slice(2, 5)) expect(event.entry).toEqual({ type: 'file', size: 11, path: join(root, 'new.txt') });
  });

  it('reports writes in nested and freshly made directories of a recursive watch (SDK watchDir)', async () => {
    const root = join(dir, 'sdk-recursive-writes');
    mkdirSync(join(root, 'nested'), { recursive: true });
    await sbx.files.write(join(root, 'nested/watched.txt'), 'before');
    const w = await collect(root, { recursive: true });
    await sbx.files.write(join(root, 'nested/watched.txt'), 'after');
    await w.waitFor(['write nested/watched.txt']);
    await sbx.files.makeDir(join(root, 'added'));
    await w.waitFor(['create added']);
    await sbx.files.write(join(root, 'added/watched.txt'), 'content');
    await w.waitFor(['create added/watched.txt', 'chmod added/watched.txt', 'write added/watched.txt']);
    // Parents made by the upload itself: the new directories' walks must skip the staging file too.
    await sbx.files.write(join(root, 'made/by/upload.txt'), 'u');
    await w.waitFor(['create made', 'create made/by', 'create made/by/upload.txt']);
    await sleep(150);
    await w.stop();
    expect(w.lines().filter((line) => STAGING.test(line))).toEqual([]);
    // Directories envd makes are chowned to the user (CHMOD), as in the reference, and so are uploaded files.
    expect(w.lines().filter((line) => /^(rename|remove) /.test(line))).toEqual([]);
    const files = w.lines().filter((line) => line.endsWith('.txt'));
    expect(files.slice(0, 6)).toEqual([
      'chmod nested/watched.txt', 'write nested/watched.txt',
      'create added/watched.txt', 'chmod added/watched.txt', 'write added/watched.txt',
      'create made/by/upload.txt',
    ]);
    // Its CHMOD and WRITE are seen only when the new directory's watch was set before the rename (so in the reference).
    expect(files.slice(6)).toEqual(files.length > 6 ? ['chmod made/by/upload.txt', 'write made/by/upload.txt'] : []);
  });

  for (const useBinaryFormat of [false, true]) {
    it(`polling watchers get the same events, and nothing from failed uploads (${useBinaryFormat ? 'binary' : 'json'})`, async () => {
      const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat }));
      const root = join(dir, `poll-writes-${useBinaryFormat}`);
      mkdirSync(root);
      writeFileSync(join(root, 'existing.txt'), 'old');
      writeFileSync(join(root, 'part-a'), 'a');
      writeFileSync(join(root, 'part-b'), 'b');
      const { watcherId } = await client.createWatcher({ path: root, includeEntry: true });
      const post = (query: Record<string, string>, init: RequestInit) => fetch(`${envd.url}/files?${new URLSearchParams(query)}`, { method: 'POST', ...init });

      const raw = await post({ path: join(root, 'existing.txt') }, { headers: { 'content-type': 'application/octet-stream' }, body: 'overwritten' });
      expect(raw.status).toBe(200);
      const form = new FormData();
      form.append('file', 'a plain field');
      expect((await post({ path: join(root, 'new.txt') }, { body: form })).status).toBe(200);
      const cut = `--cut\r\nContent-Disposition: form-data; name="file"; filename="${join(root, 'failed.txt')}"\r\n\r\n${'x'.repeat(100_000)}`;
      expect((await post({}, { headers: { 'content-type': 'multipart/form-data; boundary=cut' }, body: cut })).status).toBe(400);
      const composed = await fetch(`${envd.url}/files/compose`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ source_paths: [join(root, 'part-a'), join(root, 'part-b')], destination: join(root, 'joined') }),
      });
      expect(composed.status).toBe(200);

      const { events } = await client.getWatcherEvents({ watcherId });
      expect(events.map((e) => `${EventType[e.type]} ${e.name}`)).toEqual([
        'CHMOD existing.txt', 'WRITE existing.txt',
        'CREATE new.txt', 'CHMOD new.txt', 'WRITE new.txt',
        'CREATE joined', 'WRITE joined', 'REMOVE part-a', 'REMOVE part-b',
      ]);
      expect(events[1].entry).toMatchObject({ name: 'existing.txt', size: 11n });
      expect(events[4].entry).toMatchObject({ name: 'new.txt', size: 13n });
      await client.removeWatcher({ watcherId });
    });
  }
});

/** A unary Connect call as the Python SDK makes it: a plain HTTP POST, Connect JSON or binary proto. */
async function unary(method: string, body: Record<string, unknown>, proto: boolean): Promise<Record<string, unknown>> {
  const schemas = { CreateWatcher: [CreateWatcherRequestSchema, CreateWatcherResponseSchema], GetWatcherEvents: [GetWatcherEventsRequestSchema, GetWatcherEventsResponseSchema], RemoveWatcher: [RemoveWatcherRequestSchema, RemoveWatcherResponseSchema] } as const;
  const [requestSchema, responseSchema] = schemas[method as keyof typeof schemas];
  const response = await fetch(`${envd.url}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: { 'content-type': proto ? 'application/proto' : 'application/json', 'connect-protocol-version': '1' },
    body: proto ? toBinary(requestSchema, fromJson(requestSchema, body as JsonValue)) : JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  if (!proto) return (await response.json()) as Record<string, unknown>;
  return toJson(responseSchema, fromBinary(responseSchema, new Uint8Array(await response.arrayBuffer()))) as Record<string, unknown>;
}

interface WireEvent {
  name: string;
  type: string;
  entry?: { name: string; type?: string; size: string; owner: string; symlinkTarget?: string };
}

describe('polling watchers as the Python SDK drives them (raw Connect, JSON and proto)', () => {
  for (const proto of [false, true]) {
    const format = proto ? 'proto' : 'json';

    it(`sees a new file uploaded through /files as CREATE, CHMOD, WRITE, as the streaming watch does, entries when asked (${format})`, async () => {
      const root = join(dir, `python-${format}`);
      mkdirSync(root);
      // The Python client spells the field in camelCase (proto JSON); snake_case is valid proto JSON too.
      const withEntry = (await unary('CreateWatcher', { path: root, includeEntry: true }, proto)).watcherId as string;
      const snake = (await unary('CreateWatcher', { path: root, include_entry: true }, proto)).watcherId as string;
      const bare = (await unary('CreateWatcher', { path: root }, proto)).watcherId as string;
      const stream = await collect(root, { includeEntry: true });
      const upload = await fetch(`${envd.url}/files?${new URLSearchParams({ path: join(root, 'up.txt') })}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: 'uploaded' });
      expect(upload.status).toBe(200);
      symlinkSync(join(root, 'up.txt'), join(root, 'link'));
      await stream.waitFor(['create up.txt', 'chmod up.txt', 'write up.txt', 'create link']);
      await sleep(150);
      await stream.stop();
      const expected = ['EVENT_TYPE_CREATE up.txt', 'EVENT_TYPE_CHMOD up.txt', 'EVENT_TYPE_WRITE up.txt', 'EVENT_TYPE_CREATE link'];
      expect(stream.lines()).toEqual(['create up.txt', 'chmod up.txt', 'write up.txt', 'create link']);
      for (const id of [withEntry, snake, bare]) {
        const events = (await unary('GetWatcherEvents', { watcherId: id }, proto)).events as WireEvent[];
        expect(events.map((e) => `${e.type} ${e.name}`)).toEqual(expected);
        if (id === bare) {
          for (const event of events) expect(event.entry).toBeUndefined();
        } else {
          for (const event of events.slice(0, 3)) expect(event.entry).toMatchObject({ name: 'up.txt', type: 'FILE_TYPE_FILE', size: '8', owner: 'root' });
          // A link's entry has its target's type (never FILE_TYPE_SYMLINK) and says where it points.
          expect(events[3].entry).toMatchObject({ name: 'link', type: 'FILE_TYPE_FILE', size: '8', symlinkTarget: join(root, 'up.txt') });
        }
        expect((await unary('RemoveWatcher', { watcherId: id }, proto))).toEqual({});
      }
      for (const event of stream.events.slice(0, 3)) expect(event.entry).toEqual({ type: 'file', size: 8, path: join(root, 'up.txt') });
      expect(stream.events[3].entry).toEqual({ type: 'file', size: 8, path: join(root, 'link') });
    });
  }
});

describe('WatchDir and polling watchers over raw Connect', () => {
  for (const useBinaryFormat of [false, true]) {
    const format = useBinaryFormat ? 'binary' : 'json';

    it(`streams start first, then keepalives at the requested interval (${format})`, async () => {
      const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat }));
      const root = join(dir, `keepalive-${format}`);
      mkdirSync(root);
      const abort = new AbortController();
      const stream = client.watchDir({ path: root }, { headers: { 'keepalive-ping-interval': '1' }, signal: abort.signal });
      const cases: string[] = [];
      const started = Date.now();
      try {
        for await (const message of stream) {
          cases.push(message.event.case ?? 'none');
          if (message.event.case === 'start') writeFileSync(join(root, 'k.txt'), 'k');
          if (message.event.case === 'keepalive') break;
        }
      } finally {
        abort.abort();
      }
      expect(cases[0]).toBe('start');
      expect(cases).toContain('filesystem');
      expect(cases.at(-1)).toBe('keepalive');
      expect(Date.now() - started).toBeLessThan(3000);
    });

    it(`reports stream errors as Connect codes (${format})`, async () => {
      const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat }));
      const first = async (path: string) => {
        for await (const message of client.watchDir({ path })) return message;
        return undefined;
      };
      await expect(first(join(dir, 'nope'))).rejects.toMatchObject({ code: 5 });
      writeFileSync(join(dir, `file-${format}`), '');
      const error = await first(join(dir, `file-${format}`)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectError);
      expect(error).toMatchObject({ code: 3 });
      expect((error as ConnectError).rawMessage).toMatch(/path is not a directory/);
      await expect(client.createWatcher({ path: join(dir, 'nope') })).rejects.toMatchObject({ code: 5 });
      await expect(client.removeWatcher({ watcherId: 'wunknown' })).rejects.toMatchObject({ code: 5 });
    });

    it(`polling watcher buffers recursive events until drained (${format})`, async () => {
      const client = createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1', useBinaryFormat }));
      const root = join(dir, `poll-${format}`);
      mkdirSync(root);
      const { watcherId } = await client.createWatcher({ path: root, recursive: true, includeEntry: true });
      expect(watcherId).toMatch(/^w[a-z0-9]{20}$/);
      mkdirSync(join(root, 'd'));
      await sleep(100);
      writeFileSync(join(root, 'd/f.txt'), 'ff');
      renameSync(join(root, 'd/f.txt'), join(root, 'd/g.txt'));
      await sleep(300);
      const { events } = await client.getWatcherEvents({ watcherId });
      const lines = events.map((e) => `${EventType[e.type]} ${e.name}`);
      expect(lines).toEqual(['CREATE d', 'CREATE d/f.txt', 'WRITE d/f.txt', 'RENAME d/f.txt', 'CREATE d/g.txt']);
      expect(events[0].entry?.type).toBe(2);
      expect(events[4].entry?.name).toBe('g.txt');
      expect(events[3].entry).toBeUndefined();
      expect((await client.getWatcherEvents({ watcherId })).events).toEqual([]);
      await client.removeWatcher({ watcherId });
      await expect(client.getWatcherEvents({ watcherId })).rejects.toMatchObject({ code: 5 });
    });
  }

  it('answers a failing stream with HTTP 200 and the error in the end-stream envelope', async () => {
    const body = Buffer.from(JSON.stringify({ path: join(dir, 'absent') }));
    const header = Buffer.alloc(5);
    header.writeUInt32BE(body.length, 1);
    const response = await fetch(`${envd.url}/filesystem.Filesystem/WatchDir`, {
      method: 'POST',
      headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
      body: Buffer.concat([header, body]),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/connect+json');
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes[0]).toBe(0x02);
    const end = JSON.parse(bytes.subarray(5, 5 + bytes.readUInt32BE(1)).toString('utf8'));
    expect(end.error.code).toBe('not_found');
  });
});

describe('a watcher has the events of every completed write (no wait between the write and the read)', () => {
  const client = () => createClient(Filesystem, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1' }));
  const lines = (events: Array<{ type: EventType; name: string }>) => events.map((e) => `${EventType[e.type]} ${e.name}`);

  it('GetWatcherEvents right after each SDK write includes that write, 200 times in a row', async () => {
    const root = join(dir, 'write-then-read');
    mkdirSync(root);
    const fs = client();
    const { watcherId } = await fs.createWatcher({ path: root });
    for (let i = 0; i < 200; i++) {
      const name = `f${i % 20}.txt`;
      const existed = i >= 20;
      await sbx.files.write(join(root, name), `content ${i}`);
      const { events } = await fs.getWatcherEvents({ watcherId });
      expect(lines(events), `write #${i}`).toEqual(existed ? [`CHMOD ${name}`, `WRITE ${name}`] : [`CREATE ${name}`, `CHMOD ${name}`, `WRITE ${name}`]);
    }
    // Directory changes through the SDK too: made, moved and removed, each seen by the next read.
    await sbx.files.makeDir(join(root, 'sub'));
    // Made, then chowned to the request user (as the reference's MakeDir does).
    expect(lines((await fs.getWatcherEvents({ watcherId })).events)).toEqual(['CREATE sub', 'CHMOD sub']);
    await sbx.files.rename(join(root, 'f0.txt'), join(root, 'moved.txt'));
    expect(lines((await fs.getWatcherEvents({ watcherId })).events)).toEqual(['RENAME f0.txt', 'CREATE moved.txt']);
    await sbx.files.remove(join(root, 'moved.txt'));
    expect(lines((await fs.getWatcherEvents({ watcherId })).events)).toEqual(['REMOVE moved.txt']);
    await fs.removeWatcher({ watcherId });
  });

  it('holds under load: 8 writers at once, each reading its own watcher after each write, beside streaming watches', async () => {
    const root = join(dir, 'write-then-read-load');
    mkdirSync(root);
    const fs = client();
    // A recursive stream over everything, collecting all the while (it too must see every write).
    const stream = await collect(root, { recursive: true });
    const writer = async (w: number): Promise<number> => {
      const sub = join(root, `w${w}`);
      await sbx.files.makeDir(sub);
      const { watcherId } = await fs.createWatcher({ path: sub });
      let checked = 0;
      for (let i = 0; i < 40; i++) {
        // Large and small writes alternate, so the server is busy receiving bodies while others read.
        const body = i % 2 === 0 ? 'x'.repeat(256 * 1024) : `small ${i}`;
        await sbx.files.write(join(sub, `f${i}.txt`), body);
        const { events } = await fs.getWatcherEvents({ watcherId });
        expect(lines(events), `writer ${w} write #${i}`).toEqual([`CREATE f${i}.txt`, `CHMOD f${i}.txt`, `WRITE f${i}.txt`]);
        checked++;
      }
      await fs.removeWatcher({ watcherId });
      return checked;
    };
    const results = await Promise.all(Array.from({ length: 8 }, (_, w) => writer(w)));
    expect(results).toEqual(Array(8).fill(40));
    for (let w = 0; w < 8; w++) await stream.waitFor([`write w${w}/f39.txt`]);
    for (let w = 0; w < 8; w++) {
      expect(stream.lines().filter((l) => l.startsWith('create ') && l.includes(`w${w}/`))).toHaveLength(40);
    }
    await stream.stop();
  });
});
