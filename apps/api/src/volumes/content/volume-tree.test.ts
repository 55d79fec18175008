import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ContentError } from './content-errors.ts';
import { listDirectory } from './dir-listing.ts';
import { makeDirectory, statEntry, updateMetadata } from './entry-ops.ts';
import { OwnerPolicy } from './entry-owner.ts';
import { openDownload } from './file-download.ts';
import { uploadFile, UPLOAD_TEMP_PREFIX } from './file-upload.ts';
import { removeEntry } from './tree-removal.ts';
import { parseVolumePath } from './volume-path.ts';
import { type DirHandle, openVolumeRoot } from './volume-tree.ts';

const owners = new OwnerPolicy(pino({ level: 'silent' }));
const UPLOAD_MAX = 1024 ** 3;
let base: string;
let volume: string;
let outside: string;
let root: DirHandle;

beforeEach(async () => {
  base = mkdtempSync(join(tmpdir(), 'volume-tree-'));
  volume = join(base, 'volume');
  outside = join(base, 'outside');
  mkdirSync(volume);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), 'host secret');
  root = await openVolumeRoot(volume);
});
afterEach(async () => {
  await root.close();
  rmSync(base, { recursive: true, force: true });
});

const p = parseVolumePath;
async function failure(promise: Promise<unknown>): Promise<ContentError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ContentError);
    return error as ContentError;
  }
  throw new Error('expected a failure');
}
const text = async (path: string) => {
  const download = await openDownload(root, p(path));
  const chunks: Buffer[] = [];
  for await (const chunk of download.stream ?? []) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
};
const bodyOf = (...parts: string[]) => Readable.from(parts.map((s) => Buffer.from(s)));

describe('links never lead outside the volume', () => {
  beforeEach(() => {
    symlinkSync(outside, join(volume, 'escape'));
    symlinkSync(join(outside, 'secret'), join(volume, 'secret-link'));
    symlinkSync('../outside', join(volume, 'relative-escape'));
  });

  it('refuses a link as an intermediate component for every operation (403)', async () => {
    expect((await failure(statEntry(root, p('/escape/secret')))).status).toBe(403);
    expect((await failure(openDownload(root, p('/relative-escape/secret')))).status).toBe(403);
    expect((await failure(listDirectory(root, p('/escape'), 1))).status).toBe(403);
    expect((await failure(uploadFile(root, p('/escape/planted'), bodyOf('x'), { force: true }, owners, UPLOAD_MAX))).status).toBe(403);
    expect((await failure(makeDirectory(root, p('/escape/d'), { force: true }, owners))).status).toBe(403);
    expect((await failure(updateMetadata(root, p('/escape/secret'), { mode: 0o777 }))).status).toBe(403);
    expect((await failure(removeEntry(root, p('/escape/secret')))).status).toBe(403);
    expect(existsSync(join(outside, 'planted'))).toBe(false);
    expect(existsSync(join(outside, 'd'))).toBe(false);
    expect(lstatSync(join(outside, 'secret')).mode & 0o777).not.toBe(0o777);
  });

  it('reports a final link as a link with its target, and never reads through it', async () => {
    expect(await statEntry(root, p('/secret-link'))).toMatchObject({ type: 'symlink', target: join(outside, 'secret'), path: '/secret-link' });
    expect((await failure(openDownload(root, p('/secret-link')))).status).toBe(403);
    const listed = await listDirectory(root, p('/'), 3);
    expect(listed.map((e) => e.path).sort()).toEqual(['/escape', '/relative-escape', '/secret-link']);
  });

  it('changes a link (lchown), never its target, and refuses a mode for it', async () => {
    expect((await failure(updateMetadata(root, p('/secret-link'), { mode: 0o600 }))).status).toBe(400);
    await updateMetadata(root, p('/secret-link'), { uid: 1234 });
    expect(lstatSync(join(volume, 'secret-link')).uid).toBe(1234);
    expect(lstatSync(join(outside, 'secret')).uid).not.toBe(1234);
  });

  it('removes a link itself, and a directory holding links without touching their targets', async () => {
    await removeEntry(root, p('/escape'));
    mkdirSync(join(volume, 'tree/deeper'), { recursive: true });
    symlinkSync(outside, join(volume, 'tree/deeper/out'));
    writeFileSync(join(volume, 'tree/a'), 'a');
    await removeEntry(root, p('/tree'));
    expect(existsSync(join(volume, 'tree'))).toBe(false);
    expect(existsSync(join(volume, 'escape'))).toBe(false);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret');
  });

  it('overwrites a link at the target name with the file itself (force), leaving the target alone', async () => {
    await uploadFile(root, p('/secret-link'), bodyOf('mine'), { force: true }, owners, UPLOAD_MAX);
    expect(lstatSync(join(volume, 'secret-link')).isFile()).toBe(true);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('host secret');
  });
});

describe('writes are atomic', () => {
  it('leaves neither a partial file nor a temporary file when the body fails midway', async () => {
    writeFileSync(join(volume, 'kept'), 'old content');
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(64 * 1024, 1));
        setImmediate(() => this.destroy(new Error('client went away')));
      },
    });
    await expect(uploadFile(root, p('/kept'), failing, { force: true }, owners, UPLOAD_MAX)).rejects.toThrow('client went away');
    await expect(uploadFile(root, p('/new'), Readable.from((async function* () { yield Buffer.from('x'); throw new Error('gone'); })()), { force: false }, owners, UPLOAD_MAX)).rejects.toThrow('gone');
    expect(readFileSync(join(volume, 'kept'), 'utf8')).toBe('old content');
    expect(readdirSync(volume).sort()).toEqual(['kept']);
  });

  it('refuses (413) a body past the upload cap, by its declared length or its bytes, writing nothing', async () => {
    writeFileSync(join(volume, 'kept'), 'old content');
    // Streamed past the cap (no declared length): the file it would replace stays, no temporary file is left.
    const streamed = await failure(uploadFile(root, p('/kept'), bodyOf('12345', '67890', 'x'), { force: true }, owners, 10));
    expect(streamed).toMatchObject({ status: 413, message: expect.stringMatching(/larger than 10 bytes .*TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES/) });
    // Declared too long: refused before a byte is read.
    const declared = Object.assign(bodyOf('x'), { headers: { 'content-length': '11' } });
    expect((await failure(uploadFile(root, p('/new'), declared, { force: false }, owners, 10))).status).toBe(413);
    expect(declared.readableDidRead).toBe(false);
    expect(readFileSync(join(volume, 'kept'), 'utf8')).toBe('old content');
    expect(readdirSync(volume).sort()).toEqual(['kept']);
    // Exactly the cap is fine.
    expect(await uploadFile(root, p('/new'), bodyOf('12345', '67890'), { force: false }, owners, 10)).toMatchObject({ size: 10 });
  });

  it('refuses to replace a file without force (409) and a directory at all', async () => {
    await uploadFile(root, p('/f'), bodyOf('one'), { force: false }, owners, UPLOAD_MAX);
    expect((await failure(uploadFile(root, p('/f'), bodyOf('two'), { force: false }, owners, UPLOAD_MAX))).status).toBe(409);
    expect(await text('/f')).toBe('one');
    await uploadFile(root, p('/f'), bodyOf('two'), { force: true }, owners, UPLOAD_MAX);
    expect(await text('/f')).toBe('two');
    mkdirSync(join(volume, 'd'));
    expect((await failure(uploadFile(root, p('/d'), bodyOf('x'), { force: true }, owners, UPLOAD_MAX))).status).toBe(409);
    expect((await failure(uploadFile(root, p('/missing/f'), bodyOf('x'), { force: true }, owners, UPLOAD_MAX))).status).toBe(404);
    expect(readdirSync(volume).filter((n) => n.startsWith(UPLOAD_TEMP_PREFIX))).toEqual([]);
  });

  it('sets the owner and mode asked for, else 1000:1000 and 0644', async () => {
    const entry = await uploadFile(root, p('/owned'), bodyOf('a', 'b'), { force: false, uid: 1234, gid: 4321, mode: 0o600 }, owners, UPLOAD_MAX);
    expect(entry).toMatchObject({ name: 'owned', path: '/owned', type: 'file', size: 2, uid: 1234, gid: 4321, mode: 0o600 });
    expect(await uploadFile(root, p('/default'), bodyOf(''), { force: false }, owners, UPLOAD_MAX)).toMatchObject({ uid: 1000, gid: 1000, mode: 0o644, size: 0 });
    expect((await openDownload(root, p('/default'))).size).toBe(0);
  });
});

describe('directories', () => {
  it('makeDir: parent must exist without force; force creates parents and accepts an existing directory', async () => {
    expect((await failure(makeDirectory(root, p('/a/b'), { force: false }, owners))).status).toBe(404);
    const made = await makeDirectory(root, p('/a/b/c'), { force: true, mode: 0o700 }, owners);
    expect(made).toMatchObject({ name: 'c', path: '/a/b/c', type: 'directory', mode: 0o700, uid: 1000, gid: 1000 });
    expect(lstatSync(join(volume, 'a')).uid).toBe(1000);
    expect((await failure(makeDirectory(root, p('/a/b/c'), { force: false }, owners))).status).toBe(409);
    expect((await makeDirectory(root, p('/a/b/c'), { force: true }, owners)).path).toBe('/a/b/c');
    writeFileSync(join(volume, 'file'), '');
    expect((await failure(makeDirectory(root, p('/file'), { force: true }, owners))).status).toBe(409);
    expect((await failure(makeDirectory(root, p('/file/x'), { force: true }, owners))).status).toBe(409);
  });

  it('lists one level by default and deeper with depth, paths from the volume root', async () => {
    mkdirSync(join(volume, 'x/y/z'), { recursive: true });
    writeFileSync(join(volume, 'x/y/z/f'), 'f');
    expect((await listDirectory(root, p('/x'), 1)).map((e) => e.path)).toEqual(['/x/y']);
    expect((await listDirectory(root, p('x'), 3)).map((e) => e.path)).toEqual(['/x/y', '/x/y/z', '/x/y/z/f']);
    expect((await failure(listDirectory(root, p('/nope'), 1))).status).toBe(404);
    expect((await failure(listDirectory(root, p('/x/y/z/f'), 1))).status).toBe(404);
  });

  it('the volume root can be listed and stat-ed but never removed', async () => {
    expect(await statEntry(root, p('/'))).toMatchObject({ type: 'directory', path: '/', name: '' });
    expect((await failure(removeEntry(root, p('/')))).status).toBe(400);
    expect((await failure(removeEntry(root, p('/nope')))).status).toBe(404);
  });
});

describe('special files', () => {
  it('never opens a FIFO for reading (it would block) and lists it as unknown', async () => {
    execFileSync('mkfifo', [join(volume, 'pipe')]);
    expect((await failure(openDownload(root, p('/pipe')))).status).toBe(400);
    expect((await listDirectory(root, p('/'), 1))[0]).toMatchObject({ name: 'pipe', type: 'unknown' });
    chmodSync(join(volume, 'pipe'), 0o600);
    expect(await updateMetadata(root, p('/pipe'), { mode: 0o640 })).toMatchObject({ mode: 0o640 });
  });
});
