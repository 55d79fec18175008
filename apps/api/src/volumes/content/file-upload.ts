import { randomBytes } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pathConflict, pathNotFound, uploadTooLarge } from './content-errors.ts';
import type { WriteOptions } from './entry-options.ts';
import { DEFAULT_FILE_MODE, type OwnerPolicy } from './entry-owner.ts';
import { toEntryStat, type VolumeEntryStat } from './entry-stat.ts';
import { baseName, isVolumeRoot, type VolumePath } from './volume-path.ts';
import { type DirHandle, errnoOf, lstatAt, openParent, parentNotADirectory } from './volume-tree.ts';

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;
/** Name prefix of uploads in progress (in the target's own directory, so the final rename is atomic). */
export const UPLOAD_TEMP_PREFIX = '.tidepool-upload-';

/**
 * `PUT …/file`: streams the body into a new temporary file beside the target, then puts it in place in
 * one step — `rename` over an existing file with `force`, otherwise `link`, which fails if the name
 * was taken meanwhile (409). Until then the target is untouched; on any failure (client gone, disk or
 * quota full, a bad state) the temporary file is removed, so a write lands whole or not at all.
 * The parent directory must exist (404). A body longer than `maxBytes` is refused (413) as soon as its declared
 * length or its bytes so far say so, with nothing written.
 */
export async function uploadFile(
  root: DirHandle,
  path: VolumePath,
  body: Readable,
  options: WriteOptions,
  owners: OwnerPolicy,
  maxBytes: number,
): Promise<VolumeEntryStat> {
  if (isVolumeRoot(path)) throw pathConflict('path "/" is a directory');
  const declared = declaredLength(body);
  if (declared !== undefined && declared > maxBytes) throw uploadTooLarge(path.display, maxBytes);
  const parent = await openParent(root, path.segments, { notDirectory: parentNotADirectory });
  const name = baseName(path);
  try {
    await refuseTaken(parent, name, path, options.force);
    const tempName = `${UPLOAD_TEMP_PREFIX}${randomBytes(12).toString('hex')}`;
    const temp = await fsp.open(parent.at(tempName), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    let placed = false;
    try {
      await copyInto(temp, body, maxBytes, () => uploadTooLarge(path.display, maxBytes));
      await temp.datasync();
      await owners.applyToNew(temp, options, DEFAULT_FILE_MODE);
      const stats = await temp.stat();
      await place(parent, tempName, name, path, options.force);
      placed = true;
      return toEntryStat(stats, name, path.display);
    } finally {
      await closeQuietly(temp);
      if (!placed || !options.force) await fsp.unlink(parent.at(tempName)).catch(() => undefined);
    }
  } finally {
    if (parent !== root) await parent.close();
  }
}

async function refuseTaken(parent: DirHandle, name: string, path: VolumePath, force: boolean): Promise<void> {
  const existing = await lstatAt(parent, name);
  if (!existing) return;
  if (existing.isDirectory()) throw pathConflict(`path "${path.display}" is a directory`);
  if (!force) throw pathConflict(`path "${path.display}" already exists (pass force to overwrite it)`);
}

async function place(parent: DirHandle, tempName: string, name: string, path: VolumePath, force: boolean): Promise<void> {
  try {
    // rename(2) and link(2) never follow a link at the new name: they replace or refuse the link itself.
    if (force) await fsp.rename(parent.at(tempName), parent.at(name));
    else await fsp.link(parent.at(tempName), parent.at(name));
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'EEXIST') throw pathConflict(`path "${path.display}" already exists (pass force to overwrite it)`);
    if (code === 'EISDIR' || code === 'ENOTEMPTY') throw pathConflict(`path "${path.display}" is a directory`);
    if (code === 'ENOENT') throw pathNotFound(path.display);
    throw error;
  }
}

/** The request's `content-length`, when the body is a request that declares one. */
function declaredLength(body: Readable): number | undefined {
  const raw = (body as Readable & { headers?: Record<string, string | string[] | undefined> }).headers?.['content-length'];
  return typeof raw === 'string' && /^[0-9]+$/.test(raw) ? Number(raw) : undefined;
}

/**
 * One chunk in flight at a time: the body is paused while each chunk is written, so memory stays
 * bounded by the socket's buffers. A body that errors or closes before its end (client gone, broken
 * framing), or that grows past `maxBytes` (rejected with `tooLarge()`, the chunk that crossed it not
 * written), rejects. Written through the handle itself, not a stream made from it, so the handle stays
 * usable for sync, chown and stat afterwards. After a failed write the rest of the body is read and
 * dropped, so the error can still be answered on a healthy connection.
 */
function copyInto(handle: FileHandle, body: Readable, maxBytes: number, tooLarge: () => Error): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      if (error) {
        body.resume();
        reject(error);
      } else resolve();
    };
    let received = 0;
    const onData = (data: Buffer | string) => {
      const chunk = typeof data === 'string' ? Buffer.from(data) : data;
      received += chunk.length;
      if (received > maxBytes) {
        settle(tooLarge());
        return;
      }
      body.pause();
      writeAll(handle, chunk).then(
        () => {
          if (!settled) body.resume();
        },
        (error: Error) => settle(error),
      );
    };
    body.on('data', onData);
    body.once('end', () => settle());
    body.once('error', (error) => settle(error));
    body.once('close', () => settle(new Error('the request body ended before all of it arrived')));
  });
}

async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) offset += (await handle.write(buffer, offset, buffer.length - offset)).bytesWritten;
}

async function closeQuietly(handle: FileHandle): Promise<void> {
  await handle.close().catch(() => undefined);
}
