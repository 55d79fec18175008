/**
 * The volume-content API end to end through the published e2b SDK (`vol.writeFile/readFile/list/makeDir/
 * getInfo/exists/updateMetadata/remove`) against the real platform, with `E2B_VOLUME_API_URL` set to the
 * platform's own origin: every call and its errors, text/bytes/blob/stream formats, a 64 MiB file
 * streamed both ways with bounded memory, bearer-token auth (no API key), traversal through `..` and
 * through links planted on disk and from inside a sandbox, aborted and out-of-space uploads leaving
 * nothing behind, and a file written through the API read by a sandbox that mounts the volume.
 */
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { AuthenticationError, Sandbox, Volume, VolumeError, VolumePathNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UPLOAD_TEMP_PREFIX } from '../src/volumes/content/file-upload.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { rejectionOf } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
/** The platform's upload cap here: room for the 64 MiB file below, and one byte more is refused. */
const UPLOAD_MAX = 65 * 1024 * 1024;
const name = (what: string) => `tp-vc-${run}-${what}`;
let platform: TestPlatform;
let previousVolumeUrl: string | undefined;

beforeAll(async () => {
  platform = await startTestPlatform({ volumeUploadMaxBytes: UPLOAD_MAX });
  // The documented setup: the content API lives on the platform's origin.
  previousVolumeUrl = process.env.E2B_VOLUME_API_URL;
  process.env.E2B_VOLUME_API_URL = platform.url;
}, 600_000);

afterAll(async () => {
  if (previousVolumeUrl === undefined) delete process.env.E2B_VOLUME_API_URL;
  else process.env.E2B_VOLUME_API_URL = previousVolumeUrl;
  await platform?.dispose();
});

const newVolume = (what: string) => Volume.create(name(what), platform.sdk);
const volumeDir = (vol: Volume) => join(platform.dataDir, 'volumes', vol.volumeId);
const leftovers = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((entry) => entry.split('/').some((part) => part.startsWith(UPLOAD_TEMP_PREFIX)));

/** A content-API request without the SDK, for what the SDK cannot send (no token, raw paths). */
async function raw(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const response = await fetch(`${platform.url}${path}`, { method, headers, body });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as { code: string; message: string }) : undefined };
}

describe('every content call through the SDK', () => {
  it('writes, reads in every format, stats, lists, chowns/chmods and removes', async () => {
    const vol = await newVolume('calls');
    const written = await vol.writeFile('/hello.txt', 'Hello, volume');
    expect(written).toMatchObject({ name: 'hello.txt', path: '/hello.txt', type: 'file', size: 13, uid: 1000, gid: 1000, mode: 0o644 });
    for (const time of [written.atime, written.mtime, written.ctime]) expect(Math.abs(time.getTime() - Date.now())).toBeLessThan(60_000);

    expect(await vol.readFile('/hello.txt')).toBe('Hello, volume');
    expect(await vol.readFile('hello.txt', { format: 'text' })).toBe('Hello, volume');
    expect(Buffer.from(await vol.readFile('/hello.txt', { format: 'bytes' })).toString()).toBe('Hello, volume');
    expect(await (await vol.readFile('/hello.txt', { format: 'blob' })).text()).toBe('Hello, volume');
    expect(await new Response(await vol.readFile('/hello.txt', { format: 'stream' })).text()).toBe('Hello, volume');

    const bytes = Uint8Array.from([0, 1, 2, 255, 254]);
    expect((await vol.writeFile('/bin.dat', bytes.buffer, { mode: 0o600, uid: 1234, gid: 4321 })).size).toBe(5);
    expect(await vol.readFile('/bin.dat', { format: 'bytes' })).toEqual(bytes);
    expect(await vol.getInfo('/bin.dat')).toMatchObject({ mode: 0o600, uid: 1234, gid: 4321 });
    await vol.writeFile('/blob.txt', new Blob(['from a blob']));
    expect(await vol.readFile('/blob.txt')).toBe('from a blob');
    await vol.writeFile('/empty.txt', '');
    expect(await vol.readFile('/empty.txt')).toBe('');
    expect(await vol.readFile('/empty.txt', { format: 'bytes' })).toEqual(new Uint8Array());

    // Existing file: 409 without force, replaced with it.
    const taken = await rejectionOf(vol.writeFile('/hello.txt', 'again'));
    expect(taken).toBeInstanceOf(VolumeError);
    expect(taken.message).toMatch(/^409: .*already exists/);
    await vol.writeFile('/hello.txt', 'replaced', { force: true });
    expect(await vol.readFile('/hello.txt')).toBe('replaced');

    // Directories.
    expect(await vol.makeDir('/dir')).toMatchObject({ name: 'dir', path: '/dir', type: 'directory', uid: 1000, gid: 1000, mode: 0o755 });
    expect((await rejectionOf(vol.makeDir('/dir'))).message).toMatch(/^409: /);
    expect((await vol.makeDir('/dir', { force: true })).path).toBe('/dir');
    expect(await rejectionOf(vol.makeDir('/deep/er/dir'))).toBeInstanceOf(VolumePathNotFoundError);
    expect(await vol.makeDir('/deep/er/dir', { force: true, mode: 0o700 })).toMatchObject({ path: '/deep/er/dir', mode: 0o700 });
    await vol.writeFile('/deep/er/dir/leaf.txt', 'leaf');
    expect(await rejectionOf(vol.writeFile('/nowhere/leaf.txt', 'x'))).toBeInstanceOf(VolumePathNotFoundError);

    const top = await vol.list('/');
    expect(top.map((e) => e.name).sort()).toEqual(['bin.dat', 'blob.txt', 'deep', 'dir', 'empty.txt', 'hello.txt']);
    expect(top.find((e) => e.name === 'deep')?.type).toBe('directory');
    expect((await vol.list('/deep', { depth: 3 })).map((e) => e.path)).toEqual(['/deep/er', '/deep/er/dir', '/deep/er/dir/leaf.txt']);
    expect((await vol.list('/deep')).map((e) => e.path)).toEqual(['/deep/er']);
    expect(await rejectionOf(vol.list('/missing'))).toBeInstanceOf(VolumePathNotFoundError);

    expect(await vol.getInfo('/')).toMatchObject({ type: 'directory', path: '/' });
    expect(await vol.exists('/deep/er/dir/leaf.txt')).toBe(true);
    expect(await vol.exists('/deep/nope')).toBe(false);
    expect(await rejectionOf(vol.getInfo('/nope'))).toBeInstanceOf(VolumePathNotFoundError);

    expect(await vol.updateMetadata('/hello.txt', { uid: 1001, gid: 1002, mode: 0o640 })).toMatchObject({ path: '/hello.txt', uid: 1001, gid: 1002, mode: 0o640 });
    expect(await vol.updateMetadata('/dir', { mode: 0o775 })).toMatchObject({ type: 'directory', mode: 0o775 });
    expect(await rejectionOf(vol.updateMetadata('/nope', { mode: 0o644 }))).toBeInstanceOf(VolumePathNotFoundError);
    const badMode = await rejectionOf(vol.updateMetadata('/hello.txt', { mode: 0o17777 }));
    expect(badMode.message).toMatch(/^400: .*mode/);
    expect((await rejectionOf(vol.writeFile('/x', 'x', { uid: -1 }))).message).toMatch(/^400: .*uid/);
    // No root-owned entries and no setuid, setgid or sticky bits: a volume is mounted into sandboxes.
    // One call at a time: calls started together and awaited one by one would reject unhandled in the meantime.
    for (const [call, field] of [
      [() => vol.writeFile('/x', 'x', { uid: 0 }), 'uid'],
      [() => vol.writeFile('/x', 'x', { gid: 0 }), 'gid'],
      [() => vol.writeFile('/x', 'x', { mode: 0o4755 }), 'mode'],
      [() => vol.makeDir('/x', { mode: 0o1777 }), 'mode'],
      [() => vol.updateMetadata('/dir', { mode: 0o2775 }), 'mode'],
      [() => vol.updateMetadata('/dir', { uid: 0, gid: 0 }), 'uid'],
    ] as const) {
      expect((await rejectionOf(call())).message).toMatch(new RegExp(`^400: .*"${field}"`));
    }
    expect(await vol.exists('/x')).toBe(false);
    expect(await vol.getInfo('/dir')).toMatchObject({ uid: 1000, gid: 1000, mode: 0o775 });

    await vol.remove('/hello.txt');
    expect(await vol.exists('/hello.txt')).toBe(false);
    await vol.remove('/deep');
    expect(await vol.exists('/deep')).toBe(false);
    expect(existsSync(join(volumeDir(vol), 'deep'))).toBe(false);
    expect(await rejectionOf(vol.remove('/deep'))).toBeInstanceOf(VolumePathNotFoundError);
    expect((await rejectionOf(vol.remove('/'))).message).toMatch(/^400: .*root/);
    expect(statSync(volumeDir(vol)).isDirectory()).toBe(true);
    // Content is plain files in the volume's directory.
    expect(readFileSync(join(volumeDir(vol), 'blob.txt'), 'utf8')).toBe('from a blob');
  });

  it('answers DELETE with 204 and errors as {code: "<status>", message}', async () => {
    const vol = await newVolume('shape');
    await vol.writeFile('/f', 'x');
    const bearer = { authorization: `Bearer ${vol.token}` };
    expect(await raw('DELETE', `/volumecontent/${vol.volumeId}/path?path=/f`, bearer)).toEqual({ status: 204, body: undefined });
    const missing = await raw('GET', `/volumecontent/${vol.volumeId}/path?path=/f`, bearer);
    expect(missing).toEqual({ status: 404, body: { code: '404', message: expect.stringContaining('/f') } });
    expect((await raw('GET', `/volumecontent/${vol.volumeId}/path`, bearer)).status).toBe(400);
    expect((await raw('GET', `/volumecontent/${vol.volumeId}/dir?path=/&depth=0`, bearer)).body?.code).toBe('400');
    await vol.writeFile('/g', 'twelve bytes');
    const head = await fetch(`${platform.url}/volumecontent/${vol.volumeId}/file?path=/g`, { method: 'HEAD', headers: bearer });
    expect([head.status, head.headers.get('content-length'), await head.text()]).toEqual([200, '12', '']);
    const get = await fetch(`${platform.url}/volumecontent/${vol.volumeId}/file?path=/g`, { headers: bearer });
    expect([get.headers.get('content-type'), get.headers.get('content-length'), await get.text()]).toEqual(['application/octet-stream', '12', 'twelve bytes']);
    expect((await raw('GET', `/volumecontent/${vol.volumeId}/file?path=/`, bearer)).status).toBe(409);
  });

  it('keeps names with spaces, plus signs, percent signs and non-ASCII intact', async () => {
    const vol = await newVolume('names');
    const dir = '/dir with space/ünï+cødé 100%';
    await vol.makeDir(dir, { force: true });
    await vol.writeFile(`${dir}/a&b=c?.txt`, 'odd name');
    expect(await vol.readFile(`${dir}/a&b=c?.txt`)).toBe('odd name');
    expect((await vol.list('/', { depth: 3 })).map((e) => e.path)).toEqual(['/dir with space', `/dir with space/ünï+cødé 100%`, `${dir}/a&b=c?.txt`]);
    expect(readFileSync(join(volumeDir(vol), 'dir with space', 'ünï+cødé 100%', 'a&b=c?.txt'), 'utf8')).toBe('odd name');
  });

  it('takes apiUrl per call as well as from E2B_VOLUME_API_URL', async () => {
    const vol = await newVolume('apiurl');
    const saved = process.env.E2B_VOLUME_API_URL;
    delete process.env.E2B_VOLUME_API_URL;
    try {
      await vol.writeFile('/f', 'per call', { apiUrl: platform.url });
      expect(await vol.readFile('/f', { apiUrl: platform.url })).toBe('per call');
    } finally {
      process.env.E2B_VOLUME_API_URL = saved;
    }
  });
});

describe('auth: the volume token, never the API key', () => {
  it('needs no X-API-Key, and refuses a missing or wrong token, or an unknown volume, alike (401)', async () => {
    const vol = await newVolume('auth');
    const other = await newVolume('auth-other');
    await vol.writeFile('/f', 'secret');
    const url = `/volumecontent/${vol.volumeId}/file?path=/f`;

    const noToken = await raw('GET', url);
    expect(noToken).toMatchObject({ status: 401, body: { code: '401', message: expect.stringContaining('Bearer') } });
    expect((await raw('GET', url, { 'x-api-key': platform.apiKey })).status).toBe(401);
    expect((await raw('GET', url, { authorization: `Basic ${vol.token}` })).status).toBe(401);
    const wrong = await raw('GET', url, { authorization: `Bearer ${other.token}` });
    const truncated = await raw('GET', url, { authorization: `Bearer ${vol.token.slice(0, -1)}` });
    const unknown = await raw('GET', `/volumecontent/vol_doesnotexist00000000/file?path=/f`, { authorization: `Bearer ${vol.token}` });
    expect(wrong.status).toBe(401);
    expect(truncated.status).toBe(401);
    expect(unknown.status).toBe(401);
    // Nothing tells a caller without the token whether the volume exists.
    expect(unknown.body?.message.replace('vol_doesnotexist00000000', 'ID')).toBe(wrong.body?.message.replace(vol.volumeId, 'ID'));

    const forged = new Volume(vol.volumeId, vol.name, other.token);
    expect(await rejectionOf(forged.readFile('/f'))).toBeInstanceOf(AuthenticationError);
    expect(await rejectionOf(new Volume('vol_doesnotexist00000000', 'x', vol.token).list('/'))).toBeInstanceOf(AuthenticationError);
    const ok = await raw('GET', `/volumecontent/${vol.volumeId}/path?path=/f`, { authorization: `Bearer ${vol.token}` });
    expect(ok.status).toBe(200);
    // The platform's own routes still want the API key.
    expect((await raw('GET', '/volumes', { authorization: `Bearer ${vol.token}` })).status).toBe(401);
  });

  it('refuses content calls once the volume is destroyed', async () => {
    const vol = await newVolume('gone');
    await vol.writeFile('/f', 'x');
    expect(await Volume.destroy(vol.volumeId, platform.sdk)).toBe(true);
    expect(await rejectionOf(vol.readFile('/f'))).toBeInstanceOf(AuthenticationError);
  });
});

describe('paths stay inside the volume', () => {
  it('refuses ".." and NUL (400), and reads absolute paths from the volume root', async () => {
    const vol = await newVolume('dots');
    await vol.writeFile('/inside.txt', 'inside');
    for (const path of ['../../etc/passwd', '/../etc/passwd', '/a/../../etc/passwd', '..', 'x/..']) {
      const refused = await rejectionOf(vol.readFile(path));
      expect(refused, path).toBeInstanceOf(VolumeError);
      expect(refused.message, path).toMatch(/^400: .*\.\./);
      expect((await rejectionOf(vol.writeFile(path, 'x', { force: true }))).message).toMatch(/^400: /);
      expect((await rejectionOf(vol.remove(path))).message).toMatch(/^400: /);
    }
    expect((await raw('GET', `/volumecontent/${vol.volumeId}/file?path=%2Finside.txt%00`, { authorization: `Bearer ${vol.token}` })).status).toBe(400);
    // "/etc/passwd" is the volume's own /etc/passwd, which does not exist.
    expect(await rejectionOf(vol.readFile('/etc/passwd'))).toBeInstanceOf(VolumePathNotFoundError);
    expect(await vol.readFile('//./inside.txt')).toBe('inside');
  });

  it('never follows links planted in the volume: to the host /etc, to another volume, relative ones', async () => {
    const vol = await newVolume('links');
    const victim = await newVolume('victim');
    await victim.writeFile('/private.txt', 'victim data');
    const dir = volumeDir(vol);
    symlinkSync('/etc', join(dir, 'etc-link'));
    symlinkSync('/etc/hostname', join(dir, 'hostname-link'));
    symlinkSync(volumeDir(victim), join(dir, 'victim-link'));
    symlinkSync('../', join(dir, 'up-link'));
    mkdirSync(join(dir, 'sub'));
    symlinkSync('../../', join(dir, 'sub', 'up2'));

    for (const path of ['/etc-link/hostname', '/victim-link/private.txt', '/up-link/' + victim.volumeId + '/private.txt', '/sub/up2/etc/hostname']) {
      const refused = await rejectionOf(vol.readFile(path));
      expect(refused, path).toBeInstanceOf(VolumeError);
      expect(refused.message, path).toMatch(/^403: .*symbolic link/);
      expect((await rejectionOf(vol.getInfo(path))).message).toMatch(/^403: /);
    }
    expect((await rejectionOf(vol.readFile('/hostname-link'))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.list('/victim-link'))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.writeFile('/victim-link/planted.txt', 'x', { force: true }))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.makeDir('/victim-link/newdir', { force: true }))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.updateMetadata('/victim-link/private.txt', { mode: 0o777 }))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.remove('/victim-link/private.txt'))).message).toMatch(/^403: /);
    expect((await rejectionOf(vol.updateMetadata('/hostname-link', { mode: 0o777 }))).message).toMatch(/^400: /);

    // Links are shown as links, with their target, and never descended into.
    expect(await vol.getInfo('/etc-link')).toMatchObject({ type: 'symlink', target: '/etc', path: '/etc-link' });
    const listed = await vol.list('/', { depth: 5 });
    expect(listed.map((e) => e.path).sort()).toEqual(['/etc-link', '/hostname-link', '/sub', '/sub/up2', '/up-link', '/victim-link']);

    // Removing a link removes the link; overwriting one replaces the link, never its target.
    await vol.remove('/victim-link');
    await vol.writeFile('/hostname-link', 'mine', { force: true });
    expect((await vol.getInfo('/hostname-link')).type).toBe('file');
    await vol.remove('/sub');
    expect(readFileSync('/etc/hostname', 'utf8')).not.toBe('mine');
    expect(await victim.readFile('/private.txt')).toBe('victim data');
    expect(await victim.exists('/planted.txt')).toBe(false);
    expect(existsSync('/etc/newdir')).toBe(false);
  });

  it('holds while a directory is swapped for a link to outside in a tight loop (no check-then-use window)', async () => {
    const vol = await newVolume('race');
    const dir = volumeDir(vol);
    const outside = mkdtempSync(join(tmpdir(), 'tp-vc-outside-'));
    writeFileSync(join(outside, 'data.txt'), 'OUTSIDE');
    await vol.makeDir('/d');
    await vol.writeFile('/d/data.txt', 'inside');
    // Swaps /d for a link to `outside` and back, as fast as the shell can, until killed.
    const swapper = spawn('bash', ['-c', `cd '${dir}' && while :; do mv -T d d.real && ln -sT '${outside}' d && rm d && mv -T d.real d; done`], { stdio: 'ignore' });
    const seen = new Set<string>();
    try {
      // At least 3 s of racing; on a loaded machine go on (up to 30 s) until both a read of the volume's own
      // content and a refusal were seen, so the liveness checks below do not depend on scheduling luck.
      const started = Date.now();
      const refused = () => [...seen].some((value) => /^40[34]:|^Path/.test(value));
      while (Date.now() - started < 3000 || (Date.now() - started < 30_000 && !(seen.has('inside') && refused()))) {
        const outcomes = await Promise.allSettled([
          vol.readFile('/d/data.txt'),
          vol.list('/d').then((entries) => entries.map((e) => e.name).join(',')),
          vol.writeFile('/d/planted.txt', 'x', { force: true }).then(() => 'written'),
          vol.updateMetadata('/d/data.txt', { mode: 0o600 }).then(() => 'chmod'),
          // Without force: a forced makeDir would recreate a missing /d mid-swap and wedge the swapper.
          vol.makeDir('/d/sub').then(() => 'mkdir'),
        ]);
        for (const outcome of outcomes) {
          seen.add(outcome.status === 'fulfilled' ? String(outcome.value).replace(/planted\.txt,?|sub,?/g, '') : String((outcome.reason as Error).message).slice(0, 4));
        }
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    // Outcomes are the volume's own content, or a refusal; never the outside directory's.
    expect(seen.has('inside')).toBe(true);
    expect([...seen].some((value) => /^40[34]:|^Path/.test(value))).toBe(true);
    expect([...seen].some((value) => value.includes('OUTSIDE'))).toBe(false);
    expect(readdirSync(outside)).toEqual(['data.txt']);
    expect(readFileSync(join(outside, 'data.txt'), 'utf8')).toBe('OUTSIDE');
    expect(statSync(join(outside, 'data.txt')).mode & 0o777).not.toBe(0o600);
    rmSync(outside, { recursive: true, force: true });
  }, 60_000);
});

/** Reproducible bytes, made as they are read; `onProgress` sees how much was handed to the SDK so far. */
function generatedStream(total: number, seed: string, onProgress: (sent: number) => void): { stream: ReadableStream<Uint8Array>; digest: () => string } {
  const hash = createHash('sha256');
  let sent = 0;
  let block = createHash('sha512').update(seed).digest();
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      onProgress(sent);
      if (sent >= total) {
        controller.close();
        return;
      }
      const size = Math.min(1024 * 1024, total - sent);
      const chunk = Buffer.alloc(size);
      for (let offset = 0; offset < size; offset += block.length) {
        block = createHash('sha512').update(block).digest();
        block.copy(chunk, offset);
      }
      hash.update(chunk);
      sent += size;
      controller.enqueue(chunk);
    },
  });
  return { stream, digest: () => hash.digest('hex') };
}

describe('large files are streamed both ways', () => {
  it('writes and reads 64 MiB without holding it in memory', async () => {
    const vol = await newVolume('large');
    const dir = volumeDir(vol);
    const total = 64 * 1024 * 1024;
    // Upload: while the SDK is still being fed, most of what it was given is already on disk (in the
    // temporary file): the platform writes as it receives instead of buffering the body.
    let onDiskMidway = -1;
    const source = generatedStream(total, run, (sent) => {
      if (sent !== 48 * 1024 * 1024) return;
      const temp = readdirSync(dir).find((entry) => entry.startsWith(UPLOAD_TEMP_PREFIX));
      onDiskMidway = temp ? statSync(join(dir, temp)).size : 0;
    });
    const written = await vol.writeFile('/big.bin', source.stream);
    expect(written.size).toBe(total);
    expect(onDiskMidway).toBeGreaterThan(16 * 1024 * 1024);
    expect(leftovers(dir)).toEqual([]);
    const expected = source.digest();

    // Download: after the first chunk, with the reader idle, the process holds nowhere near the file.
    const before = process.memoryUsage().arrayBuffers;
    const reader = (await vol.readFile('/big.bin', { format: 'stream' })).getReader();
    const readBack = createHash('sha256');
    const first = await reader.read();
    await new Promise((r) => setTimeout(r, 500));
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(32 * 1024 * 1024);
    let received = first.value?.length ?? 0;
    readBack.update(first.value ?? new Uint8Array());
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received += value.length;
      readBack.update(value);
    }
    expect(received).toBe(total);
    expect(readBack.digest('hex')).toBe(expected);
  }, 180_000);
});

/** Sends the head of a PUT body, then drops the connection before the rest. */
function abortedUpload(vol: Volume, path: string, query = ''): Promise<void> {
  return new Promise((resolve) => {
    const url = new URL(`${platform.url}/volumecontent/${vol.volumeId}/file?path=${encodeURIComponent(path)}${query}`);
    const req = httpRequest(url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${vol.token}`, 'content-type': 'application/octet-stream', 'content-length': String(8 * 1024 * 1024) },
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.write(Buffer.alloc(1024 * 1024, 7), () => setTimeout(() => req.destroy(), 200));
  });
}

async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100 && !check(); i += 1) await new Promise((r) => setTimeout(r, 50));
  expect(check(), what).toBe(true);
}

describe('writes land whole or not at all', () => {
  it('an upload dropped midway leaves neither the file nor a temporary one, and keeps what it would replace', async () => {
    const vol = await newVolume('abort');
    await vol.writeFile('/kept.txt', 'old content');
    await abortedUpload(vol, '/new.bin');
    await abortedUpload(vol, '/kept.txt', '&force=true');
    await eventually(() => leftovers(volumeDir(vol)).length === 0, 'temporary files removed');
    expect(await vol.exists('/new.bin')).toBe(false);
    expect(await vol.readFile('/kept.txt')).toBe('old content');
    expect(readdirSync(volumeDir(vol))).toEqual(['kept.txt']);
  });

  it('an upload past TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES answers 413, declared or streamed, and writes nothing', async () => {
    const vol = await newVolume('cap');
    await vol.writeFile('/kept.bin', 'old content');
    const declared = await rejectionOf(vol.writeFile('/kept.bin', new Uint8Array(UPLOAD_MAX + 1).buffer, { force: true }));
    expect(declared).toBeInstanceOf(VolumeError);
    expect(declared.message).toMatch(/^413: .*larger than \d+ bytes/);
    // Chunked, no length said up front: refused once the bytes pass the cap.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL(`${platform.url}/volumecontent/${vol.volumeId}/file?path=/streamed.bin`);
      const req = httpRequest(url, { method: 'PUT', headers: { authorization: `Bearer ${vol.token}`, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' } }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      const chunk = Buffer.alloc(1024 * 1024, 3);
      let sent = 0;
      const pump = (): void => {
        while (sent <= UPLOAD_MAX && !req.destroyed) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body)).toMatchObject({ code: '413', message: expect.stringMatching(/TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES/) });
    expect(await vol.readFile('/kept.bin')).toBe('old content');
    expect(await vol.exists('/streamed.bin')).toBe(false);
    expect(leftovers(volumeDir(vol))).toEqual([]);
  });

  it('a write past the space left answers 507 and removes its temporary file', async (context) => {
    const vol = await newVolume('full');
    await vol.makeDir('/small');
    const small = join(volumeDir(vol), 'small');
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0755', 'tmpfs', small], { stdio: 'ignore' });
    } catch {
      context.skip('cannot mount a small tmpfs here (not root?): the out-of-space case needs one');
      return;
    }
    try {
      const refused = await rejectionOf(vol.writeFile('/small/too-big.bin', new Uint8Array(3 * 1024 * 1024).buffer));
      expect(refused).toBeInstanceOf(VolumeError);
      expect(refused.message).toMatch(/^507: .*not enough space/);
      expect(readdirSync(small)).toEqual([]);
      expect((await vol.writeFile('/small/fits.txt', 'fits')).size).toBe(4);
    } finally {
      execFileSync('umount', ['-l', small]);
    }
    rmdirSync(small);
    writeFileSync(join(volumeDir(vol), 'after.txt'), 'x');
    expect(await vol.readFile('/after.txt')).toBe('x');
  });
});

describe('the content API and sandboxes see one volume', () => {
  it('a file written through the API is read inside a sandbox mounting the volume, and back', async () => {
    const vol = await newVolume('interop');
    await vol.makeDir('/project/src', { force: true });
    await vol.writeFile('/project/src/main.py', 'print("hi from the API")\n');
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, volumeMounts: { '/mnt/vol': vol } } as never);
    try {
      expect((await sbx.commands.run('python3 /mnt/vol/project/src/main.py || cat /mnt/vol/project/src/main.py')).stdout).toContain('hi from the API');
      expect((await sbx.commands.run('stat -c %u:%g:%a /mnt/vol/project/src/main.py')).stdout.trim()).toBe('1000:1000:644');
      // The sandbox user owns what the API wrote, so it can change it.
      await sbx.commands.run('echo "# edited" >> /mnt/vol/project/src/main.py && mkdir /mnt/vol/out && echo result > /mnt/vol/out/r.txt');
      expect(await vol.readFile('/project/src/main.py')).toContain('# edited');
      expect(await vol.getInfo('/out/r.txt')).toMatchObject({ type: 'file', uid: 1000, gid: 1000 });
      expect(await vol.readFile('/out/r.txt')).toBe('result\n');

      // A link made inside the sandbox means the sandbox's /etc there, but the host's to the platform: refused.
      await sbx.commands.run('ln -s /etc /mnt/vol/etc-from-sandbox && ln -s /etc/shadow /mnt/vol/shadow');
      expect((await rejectionOf(vol.readFile('/etc-from-sandbox/hostname'))).message).toMatch(/^403: /);
      expect((await rejectionOf(vol.readFile('/shadow'))).message).toMatch(/^403: /);
      expect(await vol.getInfo('/shadow')).toMatchObject({ type: 'symlink', target: '/etc/shadow' });
    } finally {
      await sbx.kill();
    }
  }, 300_000);
});
