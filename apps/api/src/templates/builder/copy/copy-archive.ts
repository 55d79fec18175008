/**
 * Second pass of a COPY step: streams the uploaded archive again and writes the tar that is
 * extracted at `/` in the build container, with every entry at its planned destination, owned
 * by the step's user, with the planned mode.
 */
import type { Readable } from 'node:stream';
import tar from 'tar-stream';
import { normalizeEntryPath } from './archive-entries.ts';
import type { CopyPlan, PlannedEntry } from './copy-plan.ts';

export interface Owner {
  uid: number;
  gid: number;
}

const DIRECTORY_MODE = 0o755;

function nameOf(path: string): string {
  return path.replace(/^\/+/, '');
}

function header(entry: PlannedEntry, owner: Owner): tar.Headers {
  const base = { name: nameOf(entry.path), mode: entry.mode, uid: owner.uid, gid: owner.gid, mtime: entry.mtime ?? new Date() };
  switch (entry.kind) {
    case 'directory':
      return { ...base, type: 'directory' };
    case 'file':
      return { ...base, type: 'file', size: entry.size };
    case 'symlink':
      return { ...base, type: 'symlink', linkname: entry.linkTarget ?? '' };
    case 'hardlink':
      return { ...base, type: 'link', linkname: nameOf(entry.linkTarget ?? '') };
  }
}

function addEntry(pack: tar.Pack, headers: tar.Headers, content?: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    pack.entry(headers, content ?? Buffer.alloc(0), (error) => (error ? reject(error) : resolve()));
  });
}

function streamEntry(pack: tar.Pack, headers: tar.Headers, content: Readable): Promise<void> {
  return new Promise((resolve, reject) => {
    const sink = pack.entry(headers, (error) => (error ? reject(error) : resolve()));
    content.on('error', reject);
    content.pipe(sink);
  });
}

function readAll(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

/**
 * The tar to extract at `/`: first `createDirectories` (missing parents of the destination) and
 * the plan's implicit directories, then the planned entries as their archive entries go by.
 */
export function buildCopyArchive(openSource: () => Readable, plan: CopyPlan, owner: Owner, createDirectories: string[]): Readable {
  const pack = tar.pack();
  const byArchiveEntry = new Map<string, PlannedEntry[]>();
  const upfront: PlannedEntry[] = [];
  for (const entry of plan.entries) {
    if (entry.emitAt === undefined) {
      upfront.push(entry);
      continue;
    }
    const list = byArchiveEntry.get(entry.emitAt) ?? [];
    list.push(entry);
    byArchiveEntry.set(entry.emitAt, list);
  }
  const fail = (error: Error): void => {
    pack.destroy(error);
  };

  const run = async (): Promise<void> => {
    const mkdir = (path: string): Promise<void> =>
      addEntry(pack, header({ path, kind: 'directory', mode: DIRECTORY_MODE, mtime: undefined, size: 0 }, owner));
    for (const dir of createDirectories) await mkdir(dir);
    for (const dir of plan.implicitDirectories) await mkdir(dir);
    for (const entry of upfront) await addEntry(pack, header(entry, owner));
    if (byArchiveEntry.size === 0) {
      pack.finalize();
      return;
    }
    const source = openSource();
    const extract = tar.extract();
    extract.on('entry', (sourceHeader, stream, next) => {
      const path = normalizeEntryPath(sourceHeader.name);
      const outputs = path === undefined ? undefined : byArchiveEntry.get(path);
      const done = (error?: unknown): void => {
        if (error) {
          fail(error as Error);
          return;
        }
        next();
      };
      if (!outputs) {
        stream.on('end', () => done());
        stream.resume();
        return;
      }
      const files = outputs.filter((o) => o.kind === 'file');
      if (files.length === 1 && outputs.length === 1) {
        streamEntry(pack, header(files[0], owner), stream).then(() => done(), done);
        return;
      }
      readAll(stream)
        .then(async (content) => {
          for (const output of outputs) await addEntry(pack, header(output, owner), output.kind === 'file' ? content : undefined);
        })
        .then(() => done(), done);
    });
    extract.on('finish', () => pack.finalize());
    extract.on('error', fail);
    source.on('error', fail);
    source.pipe(extract);
  };
  run().catch(fail);
  return pack;
}
