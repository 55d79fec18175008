import { promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

/**
 * statfs magic numbers of the kernel's pseudo filesystems (linux/magic.h): their files are generated
 * when read, and their size (0 on procfs, a page on sysfs) says nothing about what a read returns.
 */
const PSEUDO_FILESYSTEMS = new Set([
  0x9fa0, // proc
  0x62656572, // sysfs
  0x27e0eb, // cgroup
  0x63677270, // cgroup2
  0x64626720, // debugfs
  0x74726163, // tracefs
  0x73636673, // securityfs
  0x62656570, // configfs
  0xcafe4a11, // bpf
  0xde5e81e4, // efivarfs
]);

async function onPseudoFilesystem(path: string): Promise<boolean> {
  const info = await fs.statfs(path).catch(() => undefined);
  return info !== undefined && PSEUDO_FILESYSTEMS.has(info.type >>> 0);
}

/** Whether a file whose size reads 0 has content all the same (one byte read at its start). */
async function hasContent(handle: FileHandle): Promise<boolean> {
  try {
    const { bytesRead } = await handle.read(Buffer.alloc(1), 0, 1, 0);
    return bytesRead > 0;
  } catch {
    return true; // not readable at an offset (ESPIPE and the like): only reading it through tells
  }
}

/**
 * The length a download of the regular file `path` (open as `handle`) can announce before sending it:
 * its size where the filesystem keeps real sizes, `undefined` where only reading to the end tells
 * (procfs, sysfs and their kind, or any file whose size reads 0 yet has content).
 */
export async function announceableLength(path: string, stats: Stats, handle: FileHandle): Promise<number | undefined> {
  if (await onPseudoFilesystem(path)) return undefined;
  if (stats.size === 0 && (await hasContent(handle))) return undefined;
  return stats.size;
}
