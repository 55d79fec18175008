/**
 * The uploaded context archive of a COPY step (a tar, usually gzipped, of paths relative to the
 * context directory): opening it, listing its entries, and refusing archives whose entries could
 * land outside the destination.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { createReadStream } from 'node:fs';
import { posix } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';

export type EntryKind = 'file' | 'directory' | 'symlink' | 'hardlink';

export interface ArchiveEntry {
  /** Relative, normalized, without `./` or a trailing slash. */
  path: string;
  kind: EntryKind;
  /** Permission bits (and setuid/setgid/sticky). */
  mode: number;
  size: number;
  mtime: Date | undefined;
  /** Symlink target as written, or the archive path a hard link refers to (normalized). */
  linkTarget?: string;
}

export class UnsafeArchiveError extends Error {}

/** `./a//b/` → `a/b`; the context root itself → undefined. Throws for absolute paths and `..`. */
export function normalizeEntryPath(name: string): string | undefined {
  if (name.startsWith('/')) throw new UnsafeArchiveError(`the archive has an absolute path '${name}'`);
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') throw new UnsafeArchiveError(`the archive path '${name}' leaves the context directory ('..')`);
    parts.push(part);
  }
  return parts.length === 0 ? undefined : parts.join('/');
}

const KINDS: Record<string, EntryKind | undefined> = {
  file: 'file',
  'contiguous-file': 'file',
  directory: 'directory',
  symlink: 'symlink',
  link: 'hardlink',
};

/** The archive's bytes, gunzipped when they start with the gzip magic. */
export function openArchive(file: string): Readable {
  const head = Buffer.alloc(2);
  const fd = openSync(file, 'r');
  let read: number;
  try {
    read = readSync(fd, head, 0, 2, 0);
  } finally {
    closeSync(fd);
  }
  const raw = createReadStream(file);
  if (read === 2 && head[0] === 0x1f && head[1] === 0x8b) {
    const gunzip = createGunzip();
    raw.on('error', (error) => gunzip.destroy(error));
    return raw.pipe(gunzip);
  }
  return raw.pipe(new PassThrough());
}

/** Converts one tar header; throws for names that escape and for devices, fifos and the like. */
export function entryFromHeader(header: tar.Headers): ArchiveEntry | undefined {
  const path = normalizeEntryPath(header.name);
  if (path === undefined) return undefined;
  const kind = KINDS[header.type ?? 'file'];
  if (!kind) throw new UnsafeArchiveError(`the archive entry '${header.name}' is a ${header.type}, which COPY does not support`);
  const entry: ArchiveEntry = { path, kind, mode: (header.mode ?? (kind === 'directory' ? 0o755 : 0o644)) & 0o7777, size: header.size ?? 0, mtime: header.mtime };
  if (kind === 'symlink') entry.linkTarget = header.linkname ?? '';
  if (kind === 'hardlink') {
    const target = normalizeEntryPath(header.linkname ?? '');
    if (target === undefined) throw new UnsafeArchiveError(`the hard link '${path}' has no target`);
    entry.linkTarget = target;
  }
  return entry;
}

/** Lists the entries of an archive (first pass; contents are skipped). */
export function scanArchive(archive: Readable): Promise<ArchiveEntry[]> {
  return new Promise((resolve, reject) => {
    const entries: ArchiveEntry[] = [];
    const extract = tar.extract();
    let failed = false;
    const fail = (error: Error): void => {
      if (failed) return;
      failed = true;
      archive.destroy();
      extract.destroy();
      reject(error instanceof UnsafeArchiveError ? error : new UnsafeArchiveError(`the uploaded files are not a readable tar archive (${error.message})`));
    };
    extract.on('entry', (header, stream, next) => {
      try {
        const entry = entryFromHeader(header);
        if (entry) entries.push(entry);
      } catch (error) {
        fail(error as Error);
        return;
      }
      stream.on('end', () => next());
      stream.resume();
    });
    extract.on('finish', () => {
      if (!failed) resolve(entries);
    });
    extract.on('error', fail);
    archive.on('error', fail);
    archive.pipe(extract);
  });
}

/** Where a relative symlink points, as an archive path; undefined when it leaves the archive. */
export function symlinkDestination(entry: ArchiveEntry): string | undefined {
  const target = entry.linkTarget ?? '';
  if (target === '' || target.startsWith('/')) return undefined;
  const joined = posix.normalize(posix.join(posix.dirname(entry.path), target));
  if (joined === '..' || joined.startsWith('../')) return undefined;
  return joined === '.' ? '' : joined.replace(/\/$/, '');
}

/**
 * Refuses archives that could write outside their destination: entries placed under a symlink
 * (written *through* it, wherever it points) and hard links to anything but a file listed before
 * them. A symlink itself may point anywhere (absolute, dangling, above the context): like Docker,
 * COPY lands it as a symlink, and nothing is ever written or read through it.
 */
export function checkArchiveSafety(entries: ArchiveEntry[]): void {
  const symlinks = new Set<string>();
  const seenFiles = new Set<string>();
  for (const entry of entries) {
    for (let slash = entry.path.indexOf('/'); slash >= 0; slash = entry.path.indexOf('/', slash + 1)) {
      const parent = entry.path.slice(0, slash);
      if (symlinks.has(parent)) throw new UnsafeArchiveError(`the archive entry '${entry.path}' lies under the symlink '${parent}'`);
    }
    if (entry.kind === 'symlink') {
      symlinks.add(entry.path);
    } else if (entry.kind === 'hardlink') {
      if (!seenFiles.has(entry.linkTarget ?? '')) {
        throw new UnsafeArchiveError(`the hard link '${entry.path}' points to '${entry.linkTarget}', which is not a file before it in the archive`);
      }
      seenFiles.add(entry.path);
    } else if (entry.kind === 'file') {
      seenFiles.add(entry.path);
      symlinks.delete(entry.path);
    } else {
      symlinks.delete(entry.path);
    }
  }
}
