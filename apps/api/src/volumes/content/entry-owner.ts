import { promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Logger } from 'pino';
import { VOLUME_OWNER } from '../volume-storage.ts';
import { forbidden } from './content-errors.ts';
import type { Ownership } from './entry-options.ts';

export const DEFAULT_FILE_MODE = 0o644;
export const DEFAULT_DIR_MODE = 0o755;

/**
 * Sets the owner and mode of something the content API just created. Without `uid`/`gid` it goes to
 * the sandbox user (1000:1000, like the volume root), so sandboxes mounting the volume can change it.
 * The mode is set explicitly (the process umask never applies). A platform that is not root cannot
 * chown: asked-for ids are refused with 403, the default owner is skipped with one warning.
 */
export class OwnerPolicy {
  private warned = false;

  constructor(private readonly logger: Logger) {}

  async applyToNew(target: FileHandle | string, wanted: Ownership, defaultMode: number): Promise<void> {
    const explicit = wanted.uid !== undefined || wanted.gid !== undefined;
    const uid = wanted.uid ?? VOLUME_OWNER.uid;
    const gid = wanted.gid ?? VOLUME_OWNER.gid;
    try {
      if (typeof target === 'string') await fsp.chown(target, uid, gid);
      else await target.chown(uid, gid);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EPERM' && code !== 'EACCES') throw error;
      if (explicit) throw forbidden(`cannot give the entry uid ${uid} / gid ${gid}: the platform does not run as root (${code})`);
      if (!this.warned) {
        this.warned = true;
        this.logger.warn('the platform does not run as root: entries written through the volume-content API keep its own uid/gid, and sandbox users may not be able to change them');
      }
    }
    // chmod after chown: chown clears setuid/setgid bits.
    const mode = wanted.mode ?? defaultMode;
    if (typeof target === 'string') await fsp.chmod(target, mode);
    else await target.chmod(mode);
  }
}
