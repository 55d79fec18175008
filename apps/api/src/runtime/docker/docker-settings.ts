/** The container engine the platform drives and the limits and isolation of every sandbox container it makes. */
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { Type } from '@sinclair/typebox';
import { flag, integer, text } from '../../settings/env-values.ts';
import { type SettingsEnv, type SettingsOf, setting, settingsGroup } from '../../settings/setting.ts';
import { DOCKER_HOST_PATTERN } from './docker-host.ts';

/** What decides the isolation default: the process's uid and whether `iptables` is on PATH. */
export interface IsolationProbe {
  uid: number | undefined;
  iptables: boolean;
}

/** Fails closed where the platform can install its rules itself; elsewhere (compose, rootless dev) it warns. */
export function defaultIsolationMode(probe: IsolationProbe): 'warn' | 'require' {
  return probe.uid === 0 && probe.iptables ? 'require' : 'warn';
}

function probeIsolation(env: SettingsEnv): IsolationProbe {
  const path = `${env.PATH ?? process.env.PATH ?? ''}${delimiter}/usr/sbin${delimiter}/sbin`;
  return { uid: process.getuid?.(), iptables: path.split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, 'iptables'))) };
}

/**
 * 16384 open files per sandbox process, but never above this process's own hard limit: the engine is
 * normally started from the same environment, and runc refuses a container asking for more than it has.
 */
function defaultNofile(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const hard = Number(line?.trim().split(/\s+/)[4]);
    return Number.isInteger(hard) && hard > 0 ? Math.min(16384, hard) : 16384;
  } catch {
    return 16384;
  }
}

export const dockerSettings = settingsGroup('Docker engine and sandbox containers', {
  dockerHost: setting(Type.String({ pattern: DOCKER_HOST_PATTERN }), {
    env: 'TIDEPOOL_DOCKER_HOST',
    read: (env) => text(env.TIDEPOOL_DOCKER_HOST),
    default: '`DOCKER_HOST`, else `/var/run/docker.sock`',
    description: 'the engine: `unix:///path` or `tcp://host:port` (compose: the [docker gate](security.md#security-model), `tcp://docker-gate:2375`)',
    forms: 'unix:///path, tcp://host:port or http://host:port, or empty',
  }),
  containerRuntime: setting(Type.String({ pattern: '^[A-Za-z0-9._-]*$' }), {
    env: 'TIDEPOOL_CONTAINER_RUNTIME',
    read: (env) => (env.TIDEPOOL_CONTAINER_RUNTIME ?? 'auto').trim(),
    default: '`auto`',
    description:
      'OCI runtime of sandboxes and builds: `auto` = `crun` when the engine has it registered and it starts a probe container with the sandboxes\' limits at startup, else the engine\'s default (one log line says which and why); set but empty = the engine\'s default (runc); or a registered name (`runc`, `crun`, `runsc` for gVisor), checked against `docker info` at startup (a named `crun` must also pass the probe)',
    forms: 'auto, a runtime name the engine has registered (letters, digits, ._-), or empty',
  }),
  sandboxNetwork: setting(Type.String({ minLength: 1 }), {
    env: 'TIDEPOOL_SANDBOX_NETWORK',
    formerEnv: 'TIDEPOOL_DOCKER_NETWORK',
    read: (env) => env.TIDEPOOL_SANDBOX_NETWORK || env.TIDEPOOL_DOCKER_NETWORK || 'tidepool',
    default: '`tidepool`',
    description: 'the sandboxes\' Docker bridge (one you made with IPv6 gets ip6tables rules too: [Network isolation](networking.md#network-isolation))',
  }),
  sandboxIsolation: setting(Type.Union([Type.Literal('warn'), Type.Literal('require')]), {
    env: 'TIDEPOOL_SANDBOX_ISOLATION',
    read: (env) => text(env.TIDEPOOL_SANDBOX_ISOLATION).toLowerCase() || defaultIsolationMode(probeIsolation(env)),
    default: '`require` as root with `iptables` on PATH, else `warn`',
    description:
      '`require`: refuse to start when isolation rules cannot be installed; `warn`: start without them, logged loudly ([Network isolation](networking.md#network-isolation))',
  }),
  sandboxPidsLimit: setting(Type.Integer({ minimum: 32 }), {
    env: 'TIDEPOOL_SANDBOX_PIDS_LIMIT',
    read: (env) => integer(env.TIDEPOOL_SANDBOX_PIDS_LIMIT, 1024),
    default: '1024',
    description: 'processes and threads per container (sandbox or build; pids cgroup)',
  }),
  sandboxNofile: setting(Type.Integer({ minimum: 1024 }), {
    env: 'TIDEPOOL_SANDBOX_NOFILE',
    read: (env) => integer(env.TIDEPOOL_SANDBOX_NOFILE, defaultNofile()),
    default: '16384 (at most the engine\'s hard limit)',
    description: 'open files per process (RLIMIT_NOFILE)',
  }),
  sandboxNproc: setting(Type.Integer({ minimum: 64 }), {
    env: 'TIDEPOOL_SANDBOX_NPROC',
    read: (env) => integer(env.TIDEPOOL_SANDBOX_NPROC, 65536),
    default: '65536',
    description: 'processes per uid (RLIMIT_NPROC, counted host-wide per uid: a backstop; the pids limit bounds a sandbox)',
  }),
  sandboxDiskMB: setting(Type.Integer({ minimum: 0 }), {
    env: 'TIDEPOOL_SANDBOX_DISK_MB',
    read: (env) => integer(env.TIDEPOOL_SANDBOX_DISK_MB, 10240),
    default: '10240',
    description: 'writable layer per container (MiB) where the storage driver enforces it (overlay2 on xfs with pquota; 0 = none)',
  }),
  sandboxCpuset: setting(Type.Boolean(), {
    env: 'TIDEPOOL_SANDBOX_CPUSET',
    read: (env) => flag(env.TIDEPOOL_SANDBOX_CPUSET, true),
    default: '`on`',
    description: 'pin a sandbox with fewer cpus than the host to that many host cpus (round-robin), so `nproc` shows its own count',
  }),
  sandboxBootIds: setting(Type.Boolean(), {
    env: 'TIDEPOOL_SANDBOX_BOOT_IDS',
    read: (env) => flag(env.TIDEPOOL_SANDBOX_BOOT_IDS, true),
    default: '`on`',
    description:
      'every sandbox reads its own `/proc/sys/kernel/random/boot_id`, new at each boot (a file under `<data dir>/boot-ids`, made immutable, bound over the kernel\'s; crun only: under runc sandboxes read the host\'s). The engine must see the data directory at the same path: `off` where the API reaches the engine through the docker gate (compose)',
  }),
});

export type DockerSettings = SettingsOf<typeof dockerSettings>;
