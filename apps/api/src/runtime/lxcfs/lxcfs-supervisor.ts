import { execFile, spawn, spawnSync } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Logger } from 'pino';
import { type ProcFileMount, lxcfsMounts, mountTypeAt } from './lxcfs-files.ts';

export interface LxcfsOptions {
  /** Where lxcfs is mounted on the host (`TIDEPOOL_LXCFS_DIR`). */
  dir: string;
  logger: Logger;
  /** The lxcfs executable; found on PATH (and in /usr/bin, /usr/sbin) when not given. */
  binary?: string;
  /** How often the mount is checked and lxcfs restarted when it died (ms). */
  checkEveryMs?: number;
  /** How long a started lxcfs may take to mount (ms). */
  mountTimeoutMs?: number;
}

const FUSE_DEVICE = '/dev/fuse';
/**
 * Every how many checks the mount is read through (a child process: a hung FUSE server must not block the API).
 * Forking the API costs ~10-20 ms of its CPU on the event loop here; the checks between see that lxcfs's process
 * still runs and the mount is its (a dead lxcfs is found as soon as before, a hung one within this many checks).
 */
const READ_EVERY_CHECKS = 6;

/**
 * One lxcfs process on the host, serving every sandbox its own /proc files (memory, cpus, uptime). Started
 * detached from the API (its own session, its own log `<dir>.log`): sandboxes bind its files, and a dead lxcfs
 * would leave them unreadable, so it outlives the API; the next start adopts the live mount instead of
 * starting another. A mount left by a dead lxcfs is lazily unmounted and lxcfs started again; the mount is
 * checked every `checkEveryMs` and restarted the same way. Where lxcfs cannot run (not installed, no
 * /dev/fuse, not root, the mount never appears) sandboxes get no binds and one warning says why.
 */
export class LxcfsSupervisor {
  private mounts: ProcFileMount[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly log: Logger;
  private warned = false;

  constructor(private readonly options: LxcfsOptions) {
    this.log = options.logger.child({ component: 'lxcfs', dir: options.dir });
  }

  /** The read-only binds every new sandbox container gets; none when lxcfs is not serving. */
  procMounts(): ProcFileMount[] {
    return this.mounts;
  }

  /** Stops using lxcfs for new containers (the engine refused the binds, e.g. behind the docker gate). */
  refuse(reason: string): void {
    if (this.mounts.length === 0) return;
    this.mounts = [];
    this.stopWatching();
    this.warnOnce(`sandboxes start without lxcfs from now on: ${reason}`);
  }

  /** Adopts a live lxcfs at `dir` or starts one; never throws (a failure leaves sandboxes without it). */
  async start(): Promise<void> {
    const problem = this.cannotRun();
    if (problem) {
      this.warnOnce(`sandboxes see the host's /proc (memory, cpus, uptime) instead of their own: ${problem}`);
      return;
    }
    try {
      if (await this.alive()) {
        this.log.info('adopting the running lxcfs');
      } else {
        await this.launch();
      }
      this.mounts = lxcfsMounts(this.options.dir, (file) => existsSync(join(this.options.dir, file)));
      this.log.info({ files: this.mounts.map((m) => m.target) }, 'sandboxes get their own /proc files from lxcfs');
      this.timer = setInterval(() => void this.check(), this.options.checkEveryMs ?? 10_000);
      this.timer.unref();
    } catch (error) {
      this.mounts = [];
      this.warnOnce(`sandboxes see the host's /proc instead of their own: lxcfs could not be started (${error instanceof Error ? error.message : String(error)})`);
    }
  }

  /** Stops watching; lxcfs itself keeps running for the sandboxes that bind its files. */
  stop(): void {
    this.stopWatching();
  }

  private stopWatching(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private checking = false;
  private checks = 0;

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await this.restartIfGone();
    } finally {
      this.checking = false;
    }
  }

  private async restartIfGone(): Promise<void> {
    this.checks += 1;
    if (this.checks % READ_EVERY_CHECKS !== 0 && this.runningPid() !== undefined && this.mountType() === 'fuse.lxcfs') return;
    if (await this.alive()) return;
    this.log.error('lxcfs is gone: starting it again (sandboxes started before keep unreadable /proc files until they are restarted or paused and resumed)');
    try {
      await this.launch();
    } catch (error) {
      this.log.error({ err: error }, 'lxcfs could not be started again; retrying at the next check');
    }
  }

  private cannotRun(): string | undefined {
    if (process.platform !== 'linux') return 'lxcfs needs Linux';
    if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'lxcfs needs root (run the API as root, or start lxcfs yourself at TIDEPOOL_LXCFS_DIR)';
    if (!existsSync(FUSE_DEVICE)) return `no ${FUSE_DEVICE} on this machine`;
    if (!this.binary()) return 'lxcfs is not installed (apt-get install lxcfs; scripts/bootstrap.sh does it when run as root)';
    return undefined;
  }

  /**
   * Mounted at `dir` as lxcfs, and answering (a dead FUSE server makes every access fail with ENOTCONN). The
   * file is read by a child process with a deadline: a hung FUSE server must not block the API's event loop.
   */
  private async alive(): Promise<boolean> {
    if (this.mountType() !== 'fuse.lxcfs') return false;
    return new Promise((resolve) => {
      execFile('head', ['-c', '64', join(this.options.dir, 'proc/meminfo')], { timeout: 3_000, killSignal: 'SIGKILL' }, (error, stdout) => resolve(!error && stdout.startsWith('MemTotal:')));
    });
  }

  private async launch(): Promise<void> {
    const { dir } = this.options;
    const binary = this.binary();
    if (!binary) throw new Error('lxcfs is not installed');
    if (this.mountType() !== undefined && this.runningPid() === undefined) {
      // Left by an lxcfs that died: detach it so a new one can mount there.
      const unmount = spawnSync('umount', ['-l', dir], { encoding: 'utf8', timeout: 10_000 });
      if (unmount.status !== 0) throw new Error(`could not unmount the dead lxcfs at ${dir}: ${unmount.stderr.trim() || unmount.error?.message}`);
    }
    if (this.runningPid() !== undefined) {
      // Started a moment ago (another platform's start on this machine): wait for its mount instead of replacing it.
      await this.waitForMount(undefined);
      return;
    }
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    const logFd = openSync(`${dir}.log`, 'a', 0o600);
    try {
      // --enable-cfs: cpuinfo, stat and cpu/online follow the CFS quota (`--cpus`), not only the cpuset.
      const child = spawn(binary, ['--foreground', '--enable-cfs', '--enable-loadavg', '-p', `${dir}.pid`, dir], { detached: true, stdio: ['ignore', logFd, logFd] });
      child.unref();
      // A spawn failure (the binary went away) is an 'error' event, never an exception of this process.
      const exited = new Promise<number | null>((resolve) => {
        child.once('exit', (code) => resolve(code));
        child.once('error', () => resolve(null));
      });
      await this.waitForMount(exited);
      this.log.info({ pid: child.pid }, 'lxcfs started');
    } finally {
      closeSync(logFd);
    }
  }

  /** Waits until the mount answers; `exited` (the lxcfs just started) ending first is a failure unless another one mounted. */
  private async waitForMount(exited: Promise<number | null> | undefined): Promise<void> {
    const { dir } = this.options;
    const timeoutMs = this.options.mountTimeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    const never = new Promise<never>(() => undefined);
    while (!(await this.alive())) {
      const code = await Promise.race([exited ?? never, new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 50))]);
      if (code !== 'waiting') {
        // Another platform's start may have mounted it first (one lxcfs per directory): use that one.
        if (await this.alive()) return;
        throw new Error(`lxcfs exited (${code}) before mounting; see ${dir}.log`);
      }
      if (Date.now() > deadline) throw new Error(`lxcfs did not mount ${dir} within ${timeoutMs} ms; see ${dir}.log`);
    }
  }

  /** What is mounted at `dir` (undefined: nothing, or mountinfo unreadable). */
  private mountType(): string | undefined {
    try {
      return mountTypeAt(readFileSync('/proc/self/mountinfo', 'utf8'), this.options.dir);
    } catch {
      return undefined;
    }
  }

  /** The pid of the lxcfs serving `dir` per its pid file, when that process is still an lxcfs of `dir`. */
  private runningPid(): number | undefined {
    try {
      const pid = Number(readFileSync(`${this.options.dir}.pid`, 'utf8').trim());
      if (!Number.isInteger(pid) || pid <= 0) return undefined;
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.some((a) => a.endsWith('lxcfs')) && argv.includes(this.options.dir) ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  private binary(): string | undefined {
    const candidates = this.options.binary
      ? [this.options.binary]
      : [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/sbin', '/bin', '/sbin'].filter(Boolean).map((d) => join(d, 'lxcfs'));
    for (const candidate of candidates) {
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
    return undefined;
  }

  private warnOnce(message: string): void {
    if (this.warned) return;
    this.warned = true;
    this.log.warn(message);
  }
}
