import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEnvd, type RunningEnvd } from './support/start-envd.ts';

let envd: RunningEnvd;
let dir: string;

beforeAll(async () => {
  envd = await startEnvd();
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'envd-files-http-')));
});
afterAll(async () => {
  await envd?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const filesUrl = (query: Record<string, string>, base = envd.url): string => `${base}/files?${new URLSearchParams(query)}`;

async function upload(path: string, body: BodyInit, headers: Record<string, string> = {}, query: Record<string, string> = {}): Promise<Response> {
  return fetch(filesUrl({ path, ...query }), { method: 'POST', headers: { 'content-type': 'application/octet-stream', ...headers }, body });
}

/** Raw multipart body, so parts can repeat or be malformed on purpose. */
function multipart(parts: Array<{ filename: string; data: string }>, boundary = 'tidepool-boundary', terminate = true): string {
  const chunks = parts.map((p) => `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${p.filename}"\r\nContent-Type: application/octet-stream\r\n\r\n${p.data}\r\n`);
  return chunks.join('') + (terminate ? `--${boundary}--\r\n` : '');
}

describe('downloads', () => {
  it('serves byte ranges, HEAD and conditional requests', async () => {
    const path = join(dir, 'range.txt');
    writeFileSync(path, '0123456789');
    const part = await fetch(filesUrl({ path }), { headers: { range: 'bytes=2-5' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe('bytes 2-5/10');
    expect(await part.text()).toBe('2345');
    const suffix = await fetch(filesUrl({ path }), { headers: { range: 'bytes=-3', 'accept-encoding': 'gzip' } });
    expect(suffix.status).toBe(206);
    expect(suffix.headers.get('content-encoding')).toBeNull();
    expect(await suffix.text()).toBe('789');
    const open = await fetch(filesUrl({ path }), { headers: { range: 'bytes=7-' } });
    expect(await open.text()).toBe('789');
    const outside = await fetch(filesUrl({ path }), { headers: { range: 'bytes=10-20' } });
    expect(outside.status).toBe(416);
    expect(outside.headers.get('content-range')).toBe('bytes */10');
    const head = await fetch(filesUrl({ path }), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('10');
    expect(head.headers.get('accept-ranges')).toBe('bytes');
    const lastModified = head.headers.get('last-modified')!;
    const cached = await fetch(filesUrl({ path }), { headers: { 'if-modified-since': lastModified } });
    expect(cached.status).toBe(304);
    const stale = await fetch(filesUrl({ path }), { headers: { 'if-modified-since': new Date(Date.parse(lastModified) - 10_000).toUTCString() } });
    expect(await stale.text()).toBe('0123456789');
    expect(stale.headers.get('content-disposition')).toBe('inline; filename="range.txt"');
  });

  it('sends empty files with Content-Length 0, gzip asked for or not', async () => {
    const path = join(dir, 'empty.bin');
    writeFileSync(path, '');
    for (const encoding of ['identity', 'gzip']) {
      const response = await fetch(filesUrl({ path }), { headers: { 'accept-encoding': encoding } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-length')).toBe('0');
      expect((await response.arrayBuffer()).byteLength).toBe(0);
    }
  });

  it('reads procfs and sysfs files to their end (their size reads 0 or 4096), chunked, whole even when a range is asked', async () => {
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8');
    expect(bootId).toMatch(/^[0-9a-f-]{36}\n$/);
    for (const encoding of ['identity', 'gzip']) {
      const proc = await fetch(filesUrl({ path: '/proc/sys/kernel/random/boot_id' }), { headers: { 'accept-encoding': encoding } });
      expect(proc.status).toBe(200);
      expect(proc.headers.get('content-length')).toBeNull();
      expect(await proc.text()).toBe(bootId);
    }
    // sysfs says 4096 bytes for a 4-byte answer: announcing that length would cut the response.
    expect(statSync('/sys/devices/system/cpu/online').size).toBe(4096);
    const sys = await fetch(filesUrl({ path: '/sys/devices/system/cpu/online' }));
    expect(sys.status).toBe(200);
    expect(await sys.text()).toBe(readFileSync('/sys/devices/system/cpu/online', 'utf8'));
    // Bigger than one read chunk of the kernel's, so the whole file takes several reads.
    const maps = await fetch(filesUrl({ path: '/proc/self/maps' }));
    expect((await maps.text()).split('\n').length).toBeGreaterThan(50);
    // Neither the length nor a range of such a file is known before reading it: ranges are ignored (200, all of it).
    const ranged = await fetch(filesUrl({ path: '/proc/sys/kernel/random/boot_id' }), { headers: { range: 'bytes=0-3' } });
    expect(ranged.status).toBe(200);
    expect(ranged.headers.get('content-range')).toBeNull();
    expect(await ranged.text()).toBe(bootId);
    const head = await fetch(filesUrl({ path: '/proc/sys/kernel/random/boot_id' }), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBeNull();
    expect(await head.text()).toBe('');
  });

  it('answers 404 with the reference message and resolves ~ and relative paths', async () => {
    const missing = await fetch(filesUrl({ path: join(dir, 'nope') }));
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ code: 404, message: `path '${join(dir, 'nope')}' does not exist` });
    const home = '/root';
    const name = `.envd-files-http-${randomBytes(4).toString('hex')}`;
    writeFileSync(join(home, name), 'home');
    try {
      expect(await (await fetch(filesUrl({ path: `~/${name}`, username: 'root' }))).text()).toBe('home');
      expect(await (await fetch(filesUrl({ path: name }))).text()).toBe('home');
    } finally {
      rmSync(join(home, name), { force: true });
    }
    const otherHome = await fetch(filesUrl({ path: '~nobody/x' }));
    expect(otherHome.status).toBe(400);
  });
});

describe('uploads', () => {
  it('refuses bad requests with 400/401 and the reference messages', async () => {
    const user = await upload(join(dir, 'u'), 'x', {}, { username: 'no-such-user' });
    expect(user.status).toBe(401);
    expect((await user.json()).message).toMatch(/^error looking up user/);
    const directory = await upload(dir, 'x');
    expect(directory.status).toBe(400);
    expect((await directory.json()).message).toContain('is a directory');
    const twice = await fetch(filesUrl({}), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=tidepool-boundary' }, body: multipart([{ filename: join(dir, 'dup'), data: 'a' }, { filename: join(dir, 'dup'), data: 'b' }]) });
    expect(twice.status).toBe(400);
    expect(existsSync(join(dir, 'dup'))).toBe(false);
    const truncated = await fetch(filesUrl({}), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=tidepool-boundary' }, body: multipart([{ filename: join(dir, 'cut'), data: 'a'.repeat(1000) }], 'tidepool-boundary', false) });
    expect(truncated.status).toBe(400);
    expect(existsSync(join(dir, 'cut'))).toBe(false);
    const noParts = await fetch(filesUrl({ path: join(dir, 'none') }), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=tidepool-boundary' }, body: '--tidepool-boundary--\r\n' });
    expect(noParts.status).toBe(400);
    const badGzip = await upload(join(dir, 'badgz'), 'definitely not gzip', { 'content-encoding': 'gzip' });
    expect(badGzip.status).toBe(400);
    expect(existsSync(join(dir, 'badgz'))).toBe(false);
    const brotli = await upload(join(dir, 'br'), 'x', { 'content-encoding': 'br' });
    expect(brotli.status).toBe(400);
    expect(readdirSync(dir).filter((name) => name.includes('.upload-'))).toEqual([]);
  });

  it('validates metadata headers and replaces the set on every upload', async () => {
    const path = join(dir, 'meta.bin');
    const tooLongKey = await upload(path, 'x', { [`x-metadata-${'k'.repeat(247)}`]: 'v' });
    expect(tooLongKey.status).toBe(400);
    const tooBig = await upload(path, 'x', { 'x-metadata-a': 'v'.repeat(2100), 'x-metadata-b': 'v'.repeat(2100) });
    expect(tooBig.status).toBe(400);
    const nonAscii = await upload(path, 'x', { 'x-metadata-a': 'caf\u00e9' });
    expect(nonAscii.status).toBe(400);
    expect(existsSync(path)).toBe(false);
    const first = await upload(path, 'x', { 'X-Metadata-Owner': 'Alice', 'x-metadata-team': 'blue' });
    expect(await first.json()).toEqual([{ path, name: 'meta.bin', type: 'file', metadata: { owner: 'Alice', team: 'blue' } }]);
    const second = await upload(path, 'y', { 'x-metadata-team': 'red' });
    expect((await second.json())[0].metadata).toEqual({ team: 'red' });
    const sbx = await Sandbox.connect('debug_sandbox_id', { debug: true, sandboxUrl: envd.url, apiKey: 'x' });
    expect((await sbx.files.getInfo(path)).metadata).toEqual({ team: 'red' });
    const third = await upload(path, 'z');
    expect((await third.json())[0].metadata).toBeUndefined();
    expect((await sbx.files.getInfo(path)).metadata ?? {}).toEqual({});
  });

  it('overwrites keeping the mode, writes through symlinks, and hands new files and dirs to the user', async () => {
    const script = join(dir, 'run.sh');
    writeFileSync(script, 'old');
    chmodSync(script, 0o750);
    expect((await upload(script, 'echo new')).status).toBe(200);
    expect(statSync(script).mode & 0o777).toBe(0o750);
    expect(readFileSync(script, 'utf8')).toBe('echo new');

    mkdirSync(join(dir, 'real'));
    writeFileSync(join(dir, 'real/target.txt'), 'before');
    symlinkSync(join(dir, 'real/target.txt'), join(dir, 'link.txt'));
    const linked = await upload(join(dir, 'link.txt'), 'after');
    expect((await linked.json())[0].path).toBe(join(dir, 'link.txt'));
    expect(lstatSync(join(dir, 'link.txt')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, 'real/target.txt'), 'utf8')).toBe('after');

    if (process.getuid?.() === 0) {
      const owned = join(dir, 'for-nobody/sub/file.txt');
      expect((await upload(owned, 'n', {}, { username: 'nobody' })).status).toBe(200);
      for (const path of [owned, join(dir, 'for-nobody/sub'), join(dir, 'for-nobody')]) expect(statSync(path).uid).toBe(65534);
      expect(statSync(owned).mode & 0o777).toBe(0o644);
    }
  });

  it('writes files whose names are as long as the filesystem allows (the staging name is shortened)', async () => {
    for (const name of ['n'.repeat(255), 'é'.repeat(127)]) {
      const path = join(dir, 'long', name);
      expect((await upload(path, name)).status).toBe(200);
      expect(readFileSync(path, 'utf8')).toBe(name);
    }
    expect(readdirSync(join(dir, 'long'))).toHaveLength(2);
  });

  it('takes multipart uploads with a path query, gzip-compressed multipart, and uploadUrl without a path', async () => {
    const single = await fetch(filesUrl({ path: join(dir, 'mp/single.txt') }), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=tidepool-boundary' }, body: multipart([{ filename: 'ignored-name', data: 'single' }]) });
    expect((await single.json())[0]).toMatchObject({ path: join(dir, 'mp/single.txt'), name: 'single.txt' });
    expect(readFileSync(join(dir, 'mp/single.txt'), 'utf8')).toBe('single');
    const zipped = await fetch(filesUrl({}), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=tidepool-boundary', 'content-encoding': 'gzip' }, body: gzipSync(multipart([{ filename: join(dir, 'mp/a'), data: 'A' }, { filename: join(dir, 'mp/b'), data: 'B' }])) });
    expect((await zipped.json()).map((f: { name: string }) => f.name)).toEqual(['a', 'b']);
    expect(readFileSync(join(dir, 'mp/b'), 'utf8')).toBe('B');
  });
});

describe('signed URLs made by the SDK', () => {
  it('upload and download through uploadUrl/downloadUrl of a secured sandbox', async () => {
    const secured = await startEnvd();
    try {
      const init = await fetch(`${secured.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ accessToken: 'sdk-token' }) });
      expect(init.status).toBe(204);
      // Sandbox.connect in debug mode has no token; the constructor (internal, but public at runtime) takes one.
      const SandboxWithToken = Sandbox as unknown as new (opts: Record<string, unknown>) => Sandbox;
      const sbx = new SandboxWithToken({ sandboxId: 'debug_sandbox_id', debug: true, sandboxUrl: secured.url, apiKey: 'x', envdAccessToken: 'sdk-token', envdVersion: '0.6.13' });
      const path = join(dir, 'signed/by-sdk.txt');
      await sbx.files.write(path, 'via header token');
      expect(await sbx.files.read(path)).toBe('via header token');

      const uploadUrl = await sbx.uploadUrl(path, { user: 'root', useSignatureExpiration: 60 });
      expect(new URL(uploadUrl).searchParams.get('signature_expiration')).toMatch(/^\d+$/);
      const form = new FormData();
      form.append('file', new Blob(['via signed upload']), 'by-sdk.txt');
      const uploaded = await fetch(uploadUrl, { method: 'POST', body: form });
      expect(uploaded.status).toBe(200);

      const downloadUrl = await sbx.downloadUrl(path);
      expect(await (await fetch(downloadUrl)).text()).toBe('via signed upload');
      // The signature covers the operation and the user.
      expect((await fetch(downloadUrl.replace('/files?', '/files?username=root&'))).status).toBe(401);
      expect((await fetch(uploadUrl)).status).toBe(401);
      const missing = await fetch(`${secured.url}/files?path=${encodeURIComponent(path)}`);
      expect(await missing.json()).toEqual({ code: 401, message: 'missing signature query parameter' });

      // Without a path the part's filename is the destination, and the signature covers path "".
      const anywhere = await sbx.uploadUrl();
      const form2 = new FormData();
      form2.append('file', new Blob(['no path']), join(dir, 'signed/from-filename.txt'));
      expect((await fetch(anywhere, { method: 'POST', body: form2 })).status).toBe(200);
      expect(readFileSync(join(dir, 'signed/from-filename.txt'), 'utf8')).toBe('no path');

      const expiring = new URL(await sbx.downloadUrl(path, { useSignatureExpiration: 1 }));
      expect((await fetch(expiring)).status).toBe(200);
      const expiredAt = Number(expiring.searchParams.get('signature_expiration'));
      await new Promise((resolve) => setTimeout(resolve, (expiredAt + 1) * 1000 - Date.now() + 50));
      const expired = await fetch(expiring);
      expect(await expired.json()).toEqual({ code: 401, message: 'signature is already expired' });
    } finally {
      await secured.close();
    }
  }, 10_000);
});

describe('signed uploads whose part is a plain form field (no filename)', () => {
  let secured: RunningEnvd;
  let sbx: Sandbox;
  beforeAll(async () => {
    secured = await startEnvd({ accessToken: 'field-token' });
    const SandboxWithToken = Sandbox as unknown as new (opts: Record<string, unknown>) => Sandbox;
    sbx = new SandboxWithToken({ sandboxId: 'debug_sandbox_id', debug: true, sandboxUrl: secured.url, apiKey: 'x', envdAccessToken: 'field-token', envdVersion: '0.6.13' });
  });
  afterAll(() => secured?.close());

  const postForm = (url: string, form: FormData) => fetch(url, { method: 'POST', body: form });

  it('writes a string field to the signed path and answers exactly the reference reply', async () => {
    const path = join(dir, 'field/hello.txt');
    const form = new FormData();
    form.append('file', 'file content');
    const response = await postForm(await sbx.uploadUrl(path, { useSignatureExpiration: 10_000 }), form);
    expect(response.status).toBe(200);
    expect(JSON.parse(await response.text())).toEqual([{ name: 'hello.txt', path, type: 'file' }]);
    expect(readFileSync(path, 'utf8')).toBe('file content');
    expect(readdirSync(join(dir, 'field'))).toEqual(['hello.txt']);
  });

  it('resolves a relative signed path in the home of the signed user', async () => {
    const name = `.envd-field-${randomBytes(4).toString('hex')}.txt`;
    const form = new FormData();
    form.append('file', 'as root');
    try {
      const response = await postForm(await sbx.uploadUrl(name, { user: 'root', useSignatureExpiration: 10_000 }), form);
      expect(await response.json()).toEqual([{ name, path: `/root/${name}`, type: 'file' }]);
      expect(readFileSync(`/root/${name}`, 'utf8')).toBe('as root');
    } finally {
      rmSync(`/root/${name}`, { force: true });
    }
  });

  it('takes a Blob appended without a filename, byte for byte', async () => {
    const path = join(dir, 'field/blob.bin');
    const bytes = randomBytes(300_000);
    const form = new FormData();
    form.append('file', new Blob([bytes]));
    const response = await postForm(await sbx.uploadUrl(path), form);
    expect(response.status).toBe(200);
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });

  it('keeps the raw bytes of a field, delimiter look-alikes included', async () => {
    const path = join(dir, 'field/raw.bin');
    const content = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from('\r\n--raw-boundaryX\r\n--raw\r\n')]);
    const body = Buffer.concat([
      Buffer.from('--raw-boundary\r\nContent-Disposition: form-data; name="file"\r\n\r\n'),
      content,
      Buffer.from('\r\n--raw-boundary--\r\n'),
    ]);
    const response = await fetch(await sbx.uploadUrl(path), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=raw-boundary' }, body });
    expect(response.status).toBe(200);
    expect(readFileSync(path).equals(content)).toBe(true);
  });

  it('refuses an expired signature, and a field without a path to write it to', async () => {
    const form = new FormData();
    form.append('file', 'file content');
    const expired = await postForm(await sbx.uploadUrl(join(dir, 'field/late.txt'), { useSignatureExpiration: -100_000 }), form);
    expect(expired.status).toBe(401);
    expect(await expired.json()).toEqual({ code: 401, message: 'signature is already expired' });
    const nowhere = await postForm(await sbx.uploadUrl(), form);
    expect(nowhere.status).toBe(400);
    expect((await nowhere.json()).message).toMatch(/without a filename needs the path query parameter/);
    expect(existsSync(join(dir, 'field/late.txt'))).toBe(false);
  });
});

describe('full disk', () => {
  let mountpoint: string | undefined;
  beforeAll(() => {
    const candidate = mkdtempSync(join(tmpdir(), 'envd-tiny-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', candidate], { stdio: 'ignore' });
      mountpoint = realpathSync(candidate);
    } catch {
      rmSync(candidate, { recursive: true, force: true });
    }
  });
  afterAll(() => {
    if (!mountpoint) return;
    execFileSync('umount', [mountpoint], { stdio: 'ignore' });
    rmSync(mountpoint, { recursive: true, force: true });
  });

  it('answers 507, delivers the answer while the body is still coming, and leaves nothing behind', async (test) => {
    if (!mountpoint) return test.skip();
    const path = join(mountpoint, 'big.bin');
    writeFileSync(path, 'previous');
    // node:http rather than fetch: the server answers before it has read the whole body.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = httpRequest(filesUrl({ path }), { method: 'POST', headers: { 'content-type': 'application/octet-stream' } }, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      request.on('error', reject);
      const chunk = Buffer.alloc(256 * 1024, 1);
      let sent = 0;
      const pump = (): void => {
        while (sent < 8 * 1024 * 1024) {
          sent += chunk.length;
          if (!request.write(chunk)) {
            request.once('drain', pump);
            return;
          }
        }
        request.end();
      };
      pump();
    });
    expect(answer.status).toBe(507);
    expect(JSON.parse(answer.body)).toEqual({ code: 507, message: 'not enough disk space available' });
    expect(readdirSync(mountpoint)).toEqual(['big.bin']);
    expect(readFileSync(path, 'utf8')).toBe('previous');

    const source = join(dir, 'compose-big');
    writeFileSync(source, randomBytes(768 * 1024));
    const composed = await fetch(`${envd.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: [source, source], destination: join(mountpoint, 'composed') }) });
    expect(composed.status).toBe(507);
    expect(existsSync(source)).toBe(true);
    expect(readdirSync(mountpoint)).toEqual(['big.bin']);
  });
});
