import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** Symlinks followed while resolving one path before giving up (as the kernel's ELOOP). */
const MAX_SYMLINK_HOPS = 40;

/**
 * A root filesystem seen from outside, the way a process chrooted into it would see it: paths
 * are absolute inside the root and symlinks resolve against the root (`/bin -> usr/bin`,
 * `/bin/sh -> /bin/dash`), never against the host. With root `/` this is plain file access.
 *
 * Ownership changes are skipped when `applyOwnership` is false (unit tests as a normal user).
 */
export class RootFilesystem {
  constructor(
    readonly root: string,
    readonly applyOwnership: boolean = process.getuid?.() === 0,
  ) {}

  /**
   * Host path of `path` inside the root, every symlink resolved (the last one too unless
   * `followLast` is false). Components that do not exist are kept as they are.
   */
  resolve(path: string, followLast = true): string {
    let pending = path.split('/').filter((c) => c !== '' && c !== '.');
    let resolved: string[] = [];
    let hops = 0;
    while (pending.length > 0) {
      const [component, ...rest] = pending;
      pending = rest;
      if (component === '..') {
        resolved.pop();
        continue;
      }
      const candidate = [...resolved, component];
      const stats = this.lstatHost(join(this.root, ...candidate));
      if (stats?.isSymbolicLink() && (pending.length > 0 || followLast)) {
        if (++hops > MAX_SYMLINK_HOPS) throw new Error(`too many levels of symbolic links in ${path}`);
        const target = readlinkSync(join(this.root, ...candidate));
        if (target.startsWith('/')) resolved = [];
        pending = [...target.split('/').filter((c) => c !== '' && c !== '.'), ...pending];
        continue;
      }
      resolved = candidate;
    }
    return join(this.root, ...resolved);
  }

  /** True when `path` exists, following symlinks (a dangling link does not exist). */
  exists(path: string): boolean {
    return existsSync(this.resolve(path));
  }

  /** lstat of `path` itself (its parents resolved), or undefined when there is nothing. */
  lstat(path: string): Stats | undefined {
    return this.lstatHost(this.resolve(path, false));
  }

  /** stat of what `path` leads to, or undefined. */
  stat(path: string): Stats | undefined {
    try {
      return statSync(this.resolve(path));
    } catch {
      return undefined;
    }
  }

  readText(path: string): string | undefined {
    try {
      return readFileSync(this.resolve(path), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /**
   * Replaces a file's content atomically (temp file + rename in the same directory). An existing
   * file keeps its mode and owner; a new one gets `mode`, owned by root.
   */
  writeText(path: string, content: string, mode = 0o644): void {
    const target = this.resolve(path);
    const previous = this.lstatHost(target);
    const temp = join(dirname(target), `.${basename(target)}.tidepool-${process.pid}`);
    try {
      writeFileSync(temp, content, { mode: 0o600 });
      chmodSync(temp, previous ? previous.mode & 0o7777 : mode);
      this.chownHost(temp, previous?.uid ?? 0, previous?.gid ?? 0);
      renameSync(temp, target);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
  }

  /** Creates a directory (and missing parents, mode 0755) with exactly `mode`. */
  makeDirectory(path: string, mode: number, uid = 0, gid = 0): void {
    const target = this.resolve(path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
    mkdirSync(target, { mode });
    chmodSync(target, mode);
    this.chownHost(target, uid, gid);
  }

  chmod(path: string, mode: number): void {
    chmodSync(this.resolve(path), mode);
  }

  /** Changes the owner of a path inside the root, following a final symlink. */
  chown(path: string, uid: number, gid: number): void {
    if (this.applyOwnership) chownSync(this.resolve(path), uid, gid);
  }

  /** Changes the owner of a host path itself (a symlink, not its target). */
  chownHost(hostPath: string, uid: number, gid: number): void {
    if (this.applyOwnership) lchownSync(hostPath, uid, gid);
  }

  /** Creates the symlink `path -> target` (target as written), replacing a dangling link. */
  symlink(path: string, target: string): void {
    const host = this.resolve(path, false);
    mkdirSync(dirname(host), { recursive: true, mode: 0o755 });
    if (this.lstatHost(host)?.isSymbolicLink()) rmSync(host);
    symlinkSync(target, host);
  }

  /** Host paths of a directory's entries, recursively (the directory itself excluded). */
  walk(hostDir: string): string[] {
    const out: string[] = [];
    for (const entry of readdirSync(hostDir, { withFileTypes: true })) {
      const full = join(hostDir, entry.name);
      out.push(full);
      if (entry.isDirectory()) out.push(...this.walk(full));
    }
    return out;
  }

  private lstatHost(hostPath: string): Stats | undefined {
    try {
      return lstatSync(hostPath);
    } catch {
      return undefined;
    }
  }
}
