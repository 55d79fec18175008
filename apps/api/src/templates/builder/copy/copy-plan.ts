/**
 * Where each entry of a COPY step's archive lands, with Docker COPY semantics:
 *
 * - `src` names a file, a directory or a glob, relative to the context directory;
 * - a directory's contents merge into `dest` (the directory itself is not copied);
 * - a file goes to `dest/<name>` when `dest` ends with `/` or is an existing directory, else to `dest`;
 * - a glob copies each match like that, into `dest` as a directory (unless it matched a single file);
 * - symlinks are kept whatever they point to; `resolveSymlinks` replaces one by what it points to when
 *   that is among the uploaded files (a link leaving them, or dangling, stays a link: nothing outside
 *   the uploaded files is ever read).
 *
 * Pure: the archive is described by its entries, the container by whether `dest` is a directory.
 */
import { minimatch } from 'minimatch';
import { posix } from 'node:path';
import { type ArchiveEntry, symlinkDestination, UnsafeArchiveError } from './archive-entries.ts';

export interface CopyRequest {
  src: string;
  /** Absolute path in the image; a trailing `/` marks a directory. */
  dest: string;
  /** `dest` exists in the image and is a directory (or a link to one). */
  destIsDirectory: boolean;
  resolveSymlinks: boolean;
  /** `--chmod`: mode of copied files; directories get it with `x` wherever it has `r`. */
  mode?: number;
}

export interface PlannedEntry {
  /** Absolute destination path, no trailing slash. */
  path: string;
  kind: 'file' | 'directory' | 'symlink' | 'hardlink';
  mode: number;
  mtime: Date | undefined;
  /** Archive entry whose contents a file takes. */
  source?: string;
  /** Archive entry at which this output is written (its own entry, or `source` for copies). */
  emitAt?: string;
  /** Symlink target as written, or the absolute destination path a hard link refers to. */
  linkTarget?: string;
  /** Size of `source` in bytes (files). */
  size: number;
}

export interface CopyPlan {
  /** Directory the copied entries land in; created (with its missing parents) when missing. */
  root: string;
  /** Directories without an archive entry of their own, outermost first. */
  implicitDirectories: string[];
  /** In archive order. */
  entries: PlannedEntry[];
}

export class CopySourceError extends Error {}

const GLOB_CHARS = /[*?[\]{}]/;
/** A symlink chain that leaves the uploaded files or ends at nothing among them. */
const OUTSIDE = Symbol('outside the uploaded files');
const MAX_LINK_DEPTH = 32;
const MAX_PLANNED = 1_000_000;

function normalizeSource(src: string): string {
  return posix.normalize(src.trim()).replace(/^(\.\/)+/, '').replace(/\/+$/, '').replace(/^\.$/, '');
}

function isUnder(path: string, dir: string): boolean {
  return dir === '' ? true : path.startsWith(`${dir}/`);
}

function relativeTo(path: string, dir: string): string {
  return dir === '' ? path : path.slice(dir.length + 1);
}

/** Directory mode derived from a `--chmod` file mode: `x` wherever there is `r`. */
export function directoryModeFor(mode: number): number {
  return mode | ((mode & 0o444) >> 2);
}

interface Item {
  entry: ArchiveEntry | undefined;
  /** Archive path of the item (a directory's contents are copied, a file is copied itself). */
  path: string;
  isDirectory: boolean;
}

class Planner {
  private readonly byPath = new Map<string, ArchiveEntry>();
  private readonly planned: PlannedEntry[] = [];
  /** First destination of every archive file, for hard links. */
  private readonly destinationOf = new Map<string, string>();

  constructor(
    private readonly entries: ArchiveEntry[],
    private readonly request: CopyRequest,
  ) {
    for (const entry of entries) this.byPath.set(entry.path, entry);
  }

  plan(): CopyPlan {
    const source = normalizeSource(this.request.src);
    const items = GLOB_CHARS.test(source) ? this.globItems(source) : [this.literalItem(source)];
    const singleFile = items.length === 1 && !items[0].isDirectory;
    const destIsDir = this.request.dest.endsWith('/') || this.request.destIsDirectory || !singleFile;
    const destRoot = posix.normalize(this.request.dest).replace(/(.)\/+$/, '$1');
    for (const item of items) {
      if (item.isDirectory) this.addDirectoryContents(item.path, destRoot, 0);
      else this.addEntry(item.entry as ArchiveEntry, destIsDir ? posix.join(destRoot, posix.basename(item.path)) : destRoot, 0);
    }
    const root = destIsDir ? destRoot : posix.dirname(destRoot);
    return { root, implicitDirectories: this.implicitDirectories(root), entries: this.planned };
  }

  private literalItem(source: string): Item {
    const entry = this.byPath.get(source);
    if (entry && entry.kind !== 'directory') return this.sourceItem(entry);
    if (entry || this.entries.some((e) => isUnder(e.path, source))) return { entry, path: source, isDirectory: true };
    throw new CopySourceError(`COPY source '${this.request.src}' is not among the uploaded files`);
  }

  private globItems(pattern: string): Item[] {
    const matched = this.entries.filter((e) => minimatch(e.path, pattern, { dot: true }));
    const matchedDirs = matched.filter((e) => e.kind === 'directory').map((e) => e.path);
    const top = matched.filter((e) => !matchedDirs.some((dir) => dir !== e.path && isUnder(e.path, dir)));
    if (top.length === 0) throw new CopySourceError(`COPY source '${this.request.src}' matches none of the uploaded files`);
    return top.map((entry) => this.sourceItem(entry));
  }

  /** A named source entry; with `resolveSymlinks`, a link to something among the uploaded files stands for it. */
  private sourceItem(entry: ArchiveEntry): Item {
    const target = entry.kind === 'symlink' && this.request.resolveSymlinks ? this.resolveLink(entry, 0) : OUTSIDE;
    if (target === OUTSIDE) return { entry, path: entry.path, isDirectory: entry.kind === 'directory' };
    const isDirectory = target === undefined || target.kind === 'directory';
    return { entry: target, path: isDirectory ? (target?.path ?? '') : entry.path, isDirectory };
  }

  /**
   * Follows a symlink through the archive to a file or directory entry (undefined: the context root, a
   * directory without an entry), or OUTSIDE when some link of the chain leaves the uploaded files or dangles.
   */
  private resolveLink(link: ArchiveEntry, depth: number): ArchiveEntry | undefined | typeof OUTSIDE {
    if (depth > MAX_LINK_DEPTH) throw new UnsafeArchiveError(`too many levels of symlinks at '${link.path}'`);
    const destination = symlinkDestination(link);
    if (destination === undefined) return OUTSIDE;
    if (destination === '') return undefined;
    const target = this.byPath.get(destination);
    if (!target) {
      if (this.entries.some((e) => isUnder(e.path, destination))) return { path: destination, kind: 'directory', mode: 0o755, size: 0, mtime: undefined };
      return OUTSIDE;
    }
    return target.kind === 'symlink' ? this.resolveLink(target, depth + 1) : target;
  }

  private keepLink(entry: ArchiveEntry, dest: string): void {
    this.planned.push({ path: dest, kind: 'symlink', mode: 0o777, mtime: entry.mtime, emitAt: entry.path, linkTarget: entry.linkTarget, size: 0 });
  }

  private addDirectoryContents(dir: string, destDir: string, depth: number): void {
    for (const entry of this.entries) {
      if (!isUnder(entry.path, dir) || entry.path === dir) continue;
      this.addEntry(entry, posix.join(destDir, relativeTo(entry.path, dir)), depth);
    }
  }

  private addEntry(entry: ArchiveEntry, dest: string, depth: number): void {
    const { mode: chmod } = this.request;
    switch (entry.kind) {
      case 'directory':
        this.planned.push({ path: dest, kind: 'directory', mode: chmod === undefined ? entry.mode : directoryModeFor(chmod), mtime: entry.mtime, emitAt: entry.path, size: 0 });
        return;
      case 'file':
        this.addFile(entry, entry, dest);
        return;
      case 'hardlink': {
        const linked = this.destinationOf.get(entry.linkTarget ?? '');
        if (linked) {
          this.planned.push({ path: dest, kind: 'hardlink', mode: 0, mtime: entry.mtime, emitAt: entry.path, linkTarget: linked, size: 0 });
        } else {
          const target = this.byPath.get(entry.linkTarget ?? '');
          if (!target || target.kind !== 'file') throw new UnsafeArchiveError(`the hard link '${entry.path}' has no file to point to`);
          this.addFile(target, target, dest);
        }
        return;
      }
      case 'symlink':
        if (this.request.resolveSymlinks) this.addResolved(entry, dest, depth);
        else this.keepLink(entry, dest);
    }
  }

  /** What a symlink points to, copied in its place; the link itself when that is not among the uploaded files. */
  private addResolved(link: ArchiveEntry, dest: string, depth: number): void {
    if (depth > MAX_LINK_DEPTH) throw new UnsafeArchiveError(`too many levels of symlinks at '${link.path}'`);
    const target = this.resolveLink(link, 0);
    if (target === OUTSIDE) {
      this.keepLink(link, dest);
      return;
    }
    if (target === undefined || target.kind === 'directory') {
      const dir = target?.path ?? '';
      if (isUnder(link.path, dir)) throw new UnsafeArchiveError(`the symlink '${link.path}' points to its own parent directory ('${link.linkTarget}'), which cannot be copied with resolveSymlinks`);
      const { mode: chmod } = this.request;
      const mode = target ? target.mode : 0o755;
      this.planned.push({ path: dest, kind: 'directory', mode: chmod === undefined ? mode : directoryModeFor(chmod), mtime: target?.mtime, size: 0 });
      this.addDirectoryContents(dir, dest, depth + 1);
      return;
    }
    this.addFile(target, target, dest);
  }

  private addFile(entry: ArchiveEntry, source: ArchiveEntry, dest: string): void {
    if (this.planned.length >= MAX_PLANNED) throw new UnsafeArchiveError(`COPY '${this.request.src}' expands to more than ${MAX_PLANNED} files`);
    const mode = this.request.mode ?? entry.mode;
    this.planned.push({ path: dest, kind: 'file', mode, mtime: entry.mtime, source: source.path, emitAt: source.path, size: source.size });
    if (!this.destinationOf.has(source.path)) this.destinationOf.set(source.path, dest);
  }

  /** Parents of planned entries, below `root`, that no planned directory provides. */
  private implicitDirectories(root: string): string[] {
    const explicit = new Set(this.planned.filter((e) => e.kind === 'directory').map((e) => e.path));
    const implicit = new Set<string>();
    for (const entry of this.planned) {
      for (let dir = posix.dirname(entry.path); dir !== root && dir !== '/' && dir.startsWith(root === '/' ? '/' : `${root}/`); dir = posix.dirname(dir)) {
        if (!explicit.has(dir)) implicit.add(dir);
      }
    }
    return [...implicit].sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1));
  }
}

export function planCopy(entries: ArchiveEntry[], request: CopyRequest): CopyPlan {
  if (!request.dest.startsWith('/')) throw new Error(`planCopy needs an absolute destination, got '${request.dest}'`);
  return new Planner(entries, request).plan();
}
