import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { chooseRuntime, isHostKernelRuntime } from './oci-runtime.ts';
import { PROBE_LABEL } from './docker-labels.ts';

/** Limits and privileges every sandbox and template build container runs with. */
export interface HardeningSettings {
  /** Most processes and threads the container may have at once (pids cgroup). */
  pidsLimit: number;
  /** Open files per process (RLIMIT_NOFILE, soft = hard); at most the engine's own hard limit (runc refuses more). */
  nofile: number;
  /** Processes per uid (RLIMIT_NPROC, soft = hard). Counted host-wide per uid: a backstop, the pids limit is the real bound. */
  nproc: number;
  /** Writable-layer quota per container (MiB), where the storage driver enforces one; 0 = none. */
  diskMB: number;
  /**
   * OCI runtime registered with the engine: `auto` (the default: crun when the engine has it registered and it starts
   * a probe container, else the engine's default), '' (the engine's default), or a name (`runc`, `crun`, `runsc` for gVisor …).
   */
  runtime: string;
}

export const DEFAULT_HARDENING: HardeningSettings = { pidsLimit: 1024, nofile: 16384, nproc: 65536, diskMB: 10240, runtime: 'auto' };

/**
 * Capabilities a sandbox keeps; every other one is dropped. Docker's default set minus NET_RAW (raw
 * sockets: spoofing, sniffing on the bridge) and MKNOD (device nodes); nothing beyond the default
 * set (no SYS_ADMIN, NET_ADMIN, SYS_PTRACE, SYS_MODULE …) is ever granted. What stays is what envd
 * (switching users, signalling and owning the user's files) and root work in the sandbox need:
 * sudo (SETUID/SETGID, AUDIT_WRITE), useradd (CHOWN, DAC_OVERRIDE, FOWNER), apt-get/dpkg (CHOWN,
 * FOWNER, FSETID for set-id bits, SETFCAP for packages shipping file capabilities, SETUID/SETGID for
 * apt's `_apt` download sandbox), servers on low ports (NET_BIND_SERVICE), chroot-based tools.
 * `no-new-privileges` is not set: it would make sudo (a setuid binary) fail for the sandbox user.
 */
export const KEPT_CAPABILITIES = [
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'SETFCAP',
  'NET_BIND_SERVICE',
  'SYS_CHROOT',
  'AUDIT_WRITE',
];

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Turns the settings into container HostConfig fields, after checking at startup what the engine can
 * do: the runtime must be registered (else startup fails with what to do), and the disk quota is
 * applied only where the storage driver enforces it (else one log line says why not).
 */
export class ContainerHardening {
  private diskQuota = false;
  /** The runtime containers are started with, once `prepare` resolved `auto`; '' = the engine's default. */
  private chosenRuntime: string;

  constructor(readonly settings: HardeningSettings = DEFAULT_HARDENING) {
    this.chosenRuntime = settings.runtime === 'auto' ? '' : settings.runtime;
  }

  /** The runtime every container is started with ('' = the engine's default); `auto` is resolved by `prepare`. */
  get runtime(): string {
    return this.chosenRuntime;
  }

  /** True when the runtime runs processes on the host kernel like runc (crun, runc, the engine's default), not gVisor. */
  get hostKernel(): boolean {
    return isHostKernelRuntime(this.chosenRuntime);
  }

  /**
   * Checks the engine once at startup. `probeImage` is used to try a disk quota on xfs (a created, never started
   * container) and whether crun starts a container here (oci-runtime.ts).
   */
  async prepare(docker: Docker, logger: Logger, probeImage: string | undefined): Promise<void> {
    const info = (await docker.info()) as { Runtimes?: Record<string, unknown>; Driver?: string; DriverStatus?: [string, string][] };
    const { runtime, diskMB } = this.settings;
    this.chosenRuntime = await chooseRuntime(docker, logger, runtime, Object.keys(info.Runtimes ?? {}), { image: probeImage, hostConfig: this.limits(64 * 1024 * 1024) });
    if (diskMB <= 0) return;
    const backing = info.DriverStatus?.find(([key]) => key === 'Backing Filesystem')?.[1];
    const driver = info.Driver ?? 'unknown';
    if (driver !== 'overlay2' || backing !== 'xfs') {
      logger.warn(
        { storageDriver: driver, backingFilesystem: backing, diskMB },
        `sandbox disk quota (TIDEPOOL_SANDBOX_DISK_MB=${diskMB}) is not enforced: the storage driver is ${driver} on ${backing ?? 'an unknown filesystem'}; per-container quotas need overlay2 on xfs mounted with pquota (or set TIDEPOOL_SANDBOX_DISK_MB=0 to silence this)`,
      );
      return;
    }
    this.diskQuota = await this.quotaWorks(docker, logger, probeImage);
  }

  /** overlay2 on xfs enforces quotas only when mounted with pquota: the engine says so when a container asks for one. */
  private async quotaWorks(docker: Docker, logger: Logger, probeImage: string | undefined): Promise<boolean> {
    if (!probeImage) return false;
    try {
      const probe = await docker.createContainer({ Image: probeImage, Entrypoint: ['/bin/true'], Cmd: [], Labels: { [PROBE_LABEL]: 'disk-quota' }, HostConfig: { NetworkMode: 'none', StorageOpt: { size: '64M' } } });
      await probe.remove({ force: true }).catch(() => undefined);
      logger.info({ diskMB: this.settings.diskMB }, 'sandbox disk quota enforced (overlay2 on xfs with pquota)');
      return true;
    } catch (error) {
      logger.warn({ err: errorMessage(error), diskMB: this.settings.diskMB }, 'sandbox disk quota is not enforced: the engine refused a per-container size (mount the Docker data root on xfs with pquota)');
      return false;
    }
  }

  /** True when containers get a writable-layer quota. */
  get diskQuotaEnforced(): boolean {
    return this.diskQuota;
  }

  /** HostConfig fields for a container with `memoryBytes` of memory (and no swap beyond it). */
  hostConfig(memoryBytes: number): Docker.HostConfig {
    const { diskMB } = this.settings;
    const runtime = this.chosenRuntime;
    return {
      ...this.limits(memoryBytes),
      ...(runtime ? { Runtime: runtime } : {}),
      ...(this.diskQuota && diskMB > 0 ? { StorageOpt: { size: `${diskMB}M` } } : {}),
    };
  }

  /** Memory, pids, ulimits and capabilities: what every container gets whatever its runtime. */
  private limits(memoryBytes: number): Docker.HostConfig {
    const { pidsLimit, nofile, nproc } = this.settings;
    return {
      Memory: memoryBytes,
      MemorySwap: memoryBytes,
      PidsLimit: pidsLimit,
      Ulimits: [
        { Name: 'nofile', Soft: nofile, Hard: nofile },
        { Name: 'nproc', Soft: nproc, Hard: nproc },
      ],
      CapDrop: ['ALL'],
      CapAdd: [...KEPT_CAPABILITIES],
    };
  }
}

/** The hardening the configuration asks for (TIDEPOOL_SANDBOX_PIDS_LIMIT … TIDEPOOL_CONTAINER_RUNTIME). */
export function containerHardening(config: {
  sandboxPidsLimit: number;
  sandboxNofile: number;
  sandboxNproc: number;
  sandboxDiskMB: number;
  containerRuntime: string;
}): ContainerHardening {
  return new ContainerHardening({
    pidsLimit: config.sandboxPidsLimit,
    nofile: config.sandboxNofile,
    nproc: config.sandboxNproc,
    diskMB: config.sandboxDiskMB,
    runtime: config.containerRuntime,
  });
}
