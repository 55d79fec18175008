import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { ProcFileMount } from '../lxcfs/lxcfs-files.ts';

const run = promisify(execFile);

/** Where the kernel shows its boot id: a container reads the host's unless something is bound over it. */
export const BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id';

/** Runtimes that let a container bind a file over BOOT_ID_PATH (runc refuses every mount inside /proc but lxcfs's ten). */
const RUNTIMES_BINDING_BOOT_ID = new Set(['crun']);

export function runtimeBindsBootId(runtime: string): boolean {
  return RUNTIMES_BINDING_BOOT_ID.has(runtime);
}

/**
 * Each sandbox container's own boot id: a file holding a new random UUID (as the kernel prints it), written on the
 * host when the container is created and bound read-only over BOOT_ID_PATH. A container is made at every boot of a
 * sandbox (a cold start, a resume from its filesystem), so each boot reads a new id; an in-memory pause keeps the
 * container and so its id. The sandbox cannot change it, as root neither: crun binds a file inside /proc read-write
 * whatever the bind's `ro` says (crun 1.8), so the file is made immutable on the host (`chattr +i`: no write, truncate
 * or attribute change without CAP_LINUX_IMMUTABLE, which a container lacks), and the container has no CAP_SYS_ADMIN to
 * unmount it. Where the file cannot be made immutable it is not bound. The file goes when the container is removed.
 */
export class BootIds {
  private refusedBecause: string | undefined;

  constructor(private readonly dir: string, private readonly logger: Logger) {}

  /** A new id for a container about to be created, and its bind; undefined once the engine refused such binds. */
  async mint(): Promise<ProcFileMount | undefined> {
    if (this.refusedBecause) return undefined;
    await fs.mkdir(this.dir, { recursive: true, mode: 0o755 });
    const source = join(this.dir, randomBytes(16).toString('hex'));
    await fs.writeFile(source, `${randomUUID()}\n`, { mode: 0o444, flag: 'wx' });
    try {
      await run('chattr', ['+i', source], { timeout: 10_000 });
    } catch (error) {
      await fs.rm(source, { force: true });
      this.refuse(`its file cannot be made immutable in ${this.dir} (chattr +i: ${error instanceof Error ? error.message.split('\n')[0] : String(error)})`);
      return undefined;
    }
    return { source, target: BOOT_ID_PATH };
  }

  /** The engine did not start a container with the bind: sandboxes read the host's boot id from now on (said once). */
  refuse(reason: string): void {
    if (this.refusedBecause) return;
    this.refusedBecause = reason;
    this.logger.warn({ reason }, 'sandboxes read the host\'s boot id: the engine did not start a container with its own bound over it');
  }

  /** The boot id file among a container's mount sources, if any. */
  fileAmong(sources: Array<string | undefined>): string | undefined {
    return sources.find((source) => source !== undefined && this.owns(source));
  }

  async release(file: string | undefined): Promise<void> {
    if (file && this.owns(file)) await this.removeFile(file);
  }

  private async removeFile(file: string): Promise<void> {
    await run('chattr', ['-i', file], { timeout: 10_000 }).catch(() => undefined);
    await fs.rm(file, { force: true });
  }

  /** Removes the files no container binds any more (`inUse`: the sources of every container's mounts). */
  async prune(inUse: Set<string>): Promise<number> {
    const names = await fs.readdir(this.dir).catch(() => [] as string[]);
    let removed = 0;
    for (const name of names) {
      const file = join(this.dir, name);
      if (inUse.has(file) || !/^[0-9a-f]{32}$/.test(name)) continue;
      await this.removeFile(file);
      removed++;
    }
    return removed;
  }

  private owns(path: string): boolean {
    return path.startsWith(`${this.dir}/`) && /^[0-9a-f]{32}$/.test(path.slice(this.dir.length + 1));
  }
}
