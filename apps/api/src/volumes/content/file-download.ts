import type { ReadStream } from 'node:fs';
import { badRequest, pathConflict, pathNotFound } from './content-errors.ts';
import { baseName, isVolumeRoot, type VolumePath } from './volume-path.ts';
import { type DirHandle, notADirectory, openParent, pinEntry, reopenForReading, symlinkRefused } from './volume-tree.ts';

export interface Download {
  size: number;
  /** Absent for an empty file. */
  stream?: ReadStream;
}

/**
 * `GET …/file`: a regular file opened for streaming (never buffered whole). The entry is pinned with
 * `O_PATH | O_NOFOLLOW` and checked before it is reopened through that descriptor, so a link is
 * refused (403), a directory is 409, and FIFOs or device nodes are never opened (400). The stream ends
 * after the size the file had when it was opened, which is the `Content-Length` sent.
 */
export async function openDownload(root: DirHandle, path: VolumePath): Promise<Download> {
  if (isVolumeRoot(path)) throw pathConflict('path "/" is a directory');
  const parent = await openParent(root, path.segments, { notDirectory: notADirectory });
  try {
    const pinned = await pinEntry(parent, baseName(path));
    if (!pinned) throw pathNotFound(path.display);
    try {
      if (pinned.stats.isSymbolicLink()) throw symlinkRefused(path);
      if (pinned.stats.isDirectory()) throw pathConflict(`path "${path.display}" is a directory; list it instead`);
      if (!pinned.stats.isFile()) throw badRequest(`path "${path.display}" is not a regular file (FIFOs, sockets and devices are not read)`);
      const size = pinned.stats.size;
      if (size === 0) return { size };
      const file = await reopenForReading(pinned.handle);
      return { size, stream: file.createReadStream({ start: 0, end: size - 1, autoClose: true, highWaterMark: 256 * 1024 }) };
    } finally {
      await pinned.handle.close().catch(() => undefined);
    }
  } finally {
    if (parent !== root) await parent.close();
  }
}
