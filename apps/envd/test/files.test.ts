import { createHash, randomBytes } from 'node:crypto';
import { closeSync, createReadStream, existsSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { get as httpGet, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { FileNotFoundError, Sandbox } from 'e2b';
import { describe, expect, it } from 'vitest';
import { readMetadata } from '../src/filesystem/xattr-metadata.ts';
import { fileSignature } from '../src/http/file-access.ts';
import { useSdkSession } from './support/sdk-session.ts';
import { type RunningEnvd, startEnvd } from './support/start-envd.ts';

let envd: RunningEnvd;
let sbx: Sandbox;
let dir: string;

useSdkSession('envd-files-', (session) => ({ envd, sbx, dir } = session));

describe('files through the e2b SDK', () => {
  it('writes and reads text, bytes, blobs and streams', async () => {
    const path = join(dir, 'nested/deeper/a.txt');
    const info = await sbx.files.write(path, 'hello world');
    expect(info).toMatchObject({ path, name: 'a.txt', type: 'file' });
    expect(await sbx.files.read(path)).toBe('hello world');
    const bytes = await sbx.files.read(path, { format: 'bytes' });
    expect(Buffer.from(bytes).toString()).toBe('hello world');
    expect(await (await sbx.files.read(path, { format: 'blob' })).text()).toBe('hello world');
    const stream = await sbx.files.read(path, { format: 'stream' });
    const chunks: Uint8Array[] = [];
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk);
    expect(Buffer.concat(chunks).toString()).toBe('hello world');
    expect(await sbx.files.read(path, { gzip: true })).toBe('hello world');
  });

  it('reads procfs files, whose size reads 0, to their end', async () => {
    const bootId = await sbx.files.read('/proc/sys/kernel/random/boot_id');
    expect(bootId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$/);
    expect(bootId).toBe(readFileSync('/proc/sys/kernel/random/boot_id', 'utf8'));
    expect(await sbx.files.read('/proc/sys/kernel/random/boot_id', { gzip: true })).toBe(bootId);
    expect(Buffer.from(await sbx.files.read('/proc/self/status', { format: 'bytes' })).toString()).toMatch(/^Name:\t/);
  });

  it('writes empty files, overwrites, and uploads octet-stream and gzip bodies', async () => {
    const empty = join(dir, 'empty');
    await sbx.files.write(empty, '');
    expect(await sbx.files.read(empty)).toBe('');
    const payload = randomBytes(3 * 1024 * 1024);
    const path = join(dir, 'bin');
    await sbx.files.write(path, 'old');
    await sbx.files.write(path, new Blob([payload]), { useOctetStream: true } as never);
    expect(readFileSync(path).equals(payload)).toBe(true);
    await sbx.files.write(path, new Blob([payload.subarray(0, 1000)]), { gzip: true } as never);
    expect(readFileSync(path).equals(payload.subarray(0, 1000))).toBe(true);
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('streamed '));
        controller.enqueue(new TextEncoder().encode('body'));
        controller.close();
      },
    });
    await sbx.files.write(join(dir, 'streamed'), streamed);
    expect(readFileSync(join(dir, 'streamed'), 'utf8')).toBe('streamed body');
    expect(readdirSync(dir).some((name) => name.includes('.upload-'))).toBe(false);
  });

  it('writes several files in one multipart request, with metadata', async () => {
    const result = await sbx.files.writeFiles([
      { path: join(dir, 'multi/one.txt'), data: 'one' },
      { path: join(dir, 'multi/two.txt'), data: 'two' },
    ]);
    expect(result.map((r) => r.name)).toEqual(['one.txt', 'two.txt']);
    expect(readFileSync(join(dir, 'multi/two.txt'), 'utf8')).toBe('two');
    await sbx.files.write(join(dir, 'meta.txt'), 'm', { metadata: { Project: 'tidepool' } } as never);
    expect(await readMetadata(join(dir, 'meta.txt'))).toEqual({ project: 'tidepool' });
    expect((await sbx.files.getInfo(join(dir, 'meta.txt'))).metadata).toEqual({ project: 'tidepool' });
  });

  it('writes several files with non-ASCII names in one multipart request (the filenames are UTF-8)', async () => {
    const names = ['naïve café.txt', '日本語.md'];
    const result = await sbx.files.writeFiles(names.map((name) => ({ path: join(dir, 'utf8', name), data: name })));
    expect(result.map((r) => r.name)).toEqual(names);
    expect(readdirSync(join(dir, 'utf8')).sort()).toEqual([...names].sort());
    for (const name of names) expect(readFileSync(join(dir, 'utf8', name), 'utf8')).toBe(name);
  });

  it('reports missing files and directories with the right errors', async () => {
    await expect(sbx.files.read(join(dir, 'missing'))).rejects.toBeInstanceOf(FileNotFoundError);
    const response = await fetch(`${envd.url}/files?path=${encodeURIComponent(dir)}`);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 400 });
    const user = await fetch(`${envd.url}/files?path=x&username=no-such-user`);
    expect(user.status).toBe(401);
    const type = await fetch(`${envd.url}/files?path=${dir}/x`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' });
    expect(type.status).toBe(400);
    const noPath = await fetch(`${envd.url}/files`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: 'x' });
    expect(noPath.status).toBe(400);
    const identityRefused = await fetch(`${envd.url}/files?path=${dir}/multi/one.txt`, { headers: { 'accept-encoding': 'br, identity;q=0' } });
    expect(identityRefused.status).toBe(406);
  });

  it('serves gzip to clients that ask for it', async () => {
    const path = join(dir, 'gz.txt');
    writeFileSync(path, 'z'.repeat(10_000));
    const response = await fetch(`${envd.url}/files?path=${encodeURIComponent(path)}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(response.headers.get('content-encoding')).toBe('gzip');
    // fetch decodes gzip transparently.
    expect((await response.text()).length).toBe(10_000);
    const upload = await fetch(`${envd.url}/files?path=${encodeURIComponent(join(dir, 'gzup'))}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream', 'content-encoding': 'gzip' }, body: gzipSync(Buffer.from('compressed')) });
    expect(upload.status).toBe(200);
    expect(readFileSync(join(dir, 'gzup'), 'utf8')).toBe('compressed');
  });
});

describe('signed URLs and tokens', () => {
  it('accepts the header token or a valid, unexpired signature', async () => {
    const signed = await startEnvd({ accessToken: 'tok-123' });
    try {
      const path = join(dir, 'signed.txt');
      writeFileSync(path, 'secret');
      const url = (query: string): string => `${signed.url}/files?${query}`;
      expect((await fetch(url(`path=${encodeURIComponent(path)}`))).status).toBe(401);
      expect((await fetch(url(`path=${encodeURIComponent(path)}`), { headers: { 'x-access-token': 'tok-123' } })).status).toBe(200);
      expect((await fetch(url(`path=${encodeURIComponent(path)}`), { headers: { 'x-access-token': 'wrong' } })).status).toBe(401);
      const sig = fileSignature(path, 'read', '', 'tok-123');
      expect(sig).toBe(`v1_${createHash('sha256').update(`${path}:read::tok-123`).digest('base64').replace(/=+$/, '')}`);
      const ok = await fetch(url(`path=${encodeURIComponent(path)}&signature=${encodeURIComponent(sig)}`));
      expect(await ok.text()).toBe('secret');
      const bad = await fetch(url(`path=${encodeURIComponent(path)}&signature=v1_nope`));
      expect((await bad.json()).message).toBe('invalid signature');
      const future = String(Math.floor(Date.now() / 1000) + 60);
      const withExpiry = fileSignature(path, 'read', 'root', 'tok-123', future);
      expect((await fetch(url(`username=root&path=${encodeURIComponent(path)}&signature=${encodeURIComponent(withExpiry)}&signature_expiration=${future}`))).status).toBe(200);
      const past = String(Math.floor(Date.now() / 1000) - 5);
      const expired = fileSignature(path, 'read', 'root', 'tok-123', past);
      const expiredResponse = await fetch(url(`username=root&path=${encodeURIComponent(path)}&signature=${encodeURIComponent(expired)}&signature_expiration=${past}`));
      expect((await expiredResponse.json()).message).toBe('signature is already expired');
      const writeSig = fileSignature(join(dir, 'up.txt'), 'write', '', 'tok-123');
      const form = new FormData();
      form.append('file', new Blob(['uploaded']), join(dir, 'up.txt'));
      const upload = await fetch(url(`path=${encodeURIComponent(join(dir, 'up.txt'))}&signature=${encodeURIComponent(writeSig)}`), { method: 'POST', body: form });
      expect(upload.status).toBe(200);
      expect(readFileSync(join(dir, 'up.txt'), 'utf8')).toBe('uploaded');
      // A read signature does not authorise a write.
      const readSigForWrite = fileSignature(join(dir, 'up.txt'), 'read', '', 'tok-123');
      const refused = await fetch(url(`path=${encodeURIComponent(join(dir, 'up.txt'))}&signature=${encodeURIComponent(readSigForWrite)}`), { method: 'POST', body: form });
      expect(refused.status).toBe(401);
      expect((await fetch(`${signed.url}/process.Process/List`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);
    } finally {
      await signed.close();
    }
  });
});

describe('compose', () => {
  it('concatenates in order, deletes sources, and leaves sources on failure', async () => {
    const parts = ['p1', 'p2', 'p3'].map((name, i) => {
      const path = join(dir, `compose-${name}`);
      writeFileSync(path, `part${i};`);
      return path;
    });
    const response = await fetch(`${envd.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: parts, destination: join(dir, 'composed/out.txt') }) });
    expect(response.status).toBe(200);
    // The interface's "Composed file result": exactly path, name and type (`file` or `directory`).
    expect(await response.json()).toEqual({ path: join(dir, 'composed/out.txt'), name: 'out.txt', type: 'file' });
    expect(readFileSync(join(dir, 'composed/out.txt'), 'utf8')).toBe('part0;part1;part2;');
    expect(parts.some((p) => existsSync(p))).toBe(false);
    const keep = join(dir, 'keep');
    writeFileSync(keep, 'k');
    const missing = await fetch(`${envd.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: [keep, join(dir, 'gone')], destination: join(dir, 'x') }) });
    expect(missing.status).toBe(404);
    expect(existsSync(keep)).toBe(true);
    const empty = await fetch(`${envd.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: [], destination: join(dir, 'x') }) });
    expect(empty.status).toBe(400);
    const self = await fetch(`${envd.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: [keep], destination: keep }) });
    expect(self.status).toBe(400);
    expect(statSync(keep).size).toBe(1);
  });
});

describe('streaming', () => {
  it('moves 192 MiB up and down without holding it in memory', async () => {
    const size = 192 * 1024 * 1024;
    const source = join(dir, 'big-source.bin');
    const chunk = randomBytes(1024 * 1024);
    const fd = openSync(source, 'w');
    for (let i = 0; i < size / chunk.length; i++) writeSync(fd, chunk);
    closeSync(fd);
    const target = join(dir, 'big.bin');
    const url = new URL(`${envd.url}/files?path=${encodeURIComponent(target)}`);
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const request = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/octet-stream' } }, (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
        });
        request.on('error', reject);
        createReadStream(source).pipe(request);
      });
      expect(status).toBe(200);
      expect(statSync(target).size).toBe(size);
      const received = await new Promise<number>((resolve, reject) => {
        httpGet(url, (response) => {
          let total = 0;
          response.on('data', (part: Buffer) => {
            total += part.length;
          });
          response.on('end', () => resolve(total));
        }).on('error', reject);
      });
      expect(received).toBe(size);
    } finally {
      clearInterval(sampler);
      rmSync(source, { force: true });
      rmSync(target, { force: true });
    }
    // Client and server share this process: growth far below the file size means nothing was buffered whole.
    expect(peak - before).toBeLessThan(size / 3);
  }, 60_000);
});
