import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkArchiveSafety, openArchive, scanArchive } from './archive-entries.ts';
import { buildCopyArchive } from './copy-archive.ts';
import { planCopy } from './copy-plan.ts';

let dir: string;
let archive: string;

async function tarBytes(entries: Array<{ name: string; type?: 'file' | 'directory' | 'symlink'; content?: string; linkname?: string; mode?: number }>): Promise<Buffer> {
  const pack = tar.pack();
  for (const e of entries) pack.entry({ name: e.name, type: e.type ?? 'file', linkname: e.linkname, mode: e.mode, uid: 501, gid: 20 }, e.content ?? '');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
}

interface Out {
  name: string;
  type: string;
  uid: number;
  gid: number;
  mode: string;
  content?: string;
  linkname?: string;
}

function readTar(stream: Readable): Promise<Out[]> {
  return new Promise((resolve, reject) => {
    const out: Out[] = [];
    const extract = tar.extract();
    extract.on('entry', (h, s, next) => {
      const chunks: Buffer[] = [];
      s.on('data', (c: Buffer) => chunks.push(c));
      s.on('end', () => {
        out.push({ name: h.name, type: h.type ?? '', uid: h.uid ?? -1, gid: h.gid ?? -1, mode: (h.mode ?? 0).toString(8), ...(h.type === 'file' ? { content: Buffer.concat(chunks).toString() } : {}), ...(h.linkname ? { linkname: h.linkname } : {}) });
        next();
      });
    });
    extract.on('finish', () => resolve(out));
    extract.on('error', reject);
    stream.on('error', reject);
    stream.pipe(extract);
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'copy-archive-'));
  archive = join(dir, 'ctx.tar.gz');
  const bytes = await tarBytes([
    { name: 'src/', type: 'directory', mode: 0o700 },
    { name: 'src/a.txt', content: 'alpha', mode: 0o600 },
    { name: 'src/deep/b.txt', content: 'beta', mode: 0o644 },
    { name: 'src/link', type: 'symlink', linkname: 'a.txt' },
  ]);
  await writeFile(archive, gzipSync(bytes));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('buildCopyArchive', () => {
  it('writes every planned entry at its destination, owned by the step user, after the missing parents', async () => {
    const entries = await scanArchive(openArchive(archive));
    checkArchiveSafety(entries);
    const plan = planCopy(entries, { src: 'src', dest: '/opt/app', destIsDirectory: false, resolveSymlinks: false });
    const out = await readTar(buildCopyArchive(() => openArchive(archive), plan, { uid: 1000, gid: 1000 }, ['/opt/app']));
    expect(out).toEqual([
      { name: 'opt/app', type: 'directory', uid: 1000, gid: 1000, mode: '755' },
      { name: 'opt/app/deep', type: 'directory', uid: 1000, gid: 1000, mode: '755' },
      { name: 'opt/app/a.txt', type: 'file', uid: 1000, gid: 1000, mode: '600', content: 'alpha' },
      { name: 'opt/app/deep/b.txt', type: 'file', uid: 1000, gid: 1000, mode: '644', content: 'beta' },
      { name: 'opt/app/link', type: 'symlink', uid: 1000, gid: 1000, mode: '777', linkname: 'a.txt' },
    ]);
  });

  it('copies one source to several destinations when symlinks are resolved', async () => {
    const entries = await scanArchive(openArchive(archive));
    const plan = planCopy(entries, { src: 'src', dest: '/x/', destIsDirectory: true, resolveSymlinks: true, mode: 0o640 });
    const out = await readTar(buildCopyArchive(() => openArchive(archive), plan, { uid: 0, gid: 0 }, []));
    expect(out.filter((o) => o.type === 'file').map((o) => [o.name, o.content, o.mode])).toEqual([
      ['x/a.txt', 'alpha', '640'],
      ['x/link', 'alpha', '640'],
      ['x/deep/b.txt', 'beta', '640'],
    ]);
  });
});
