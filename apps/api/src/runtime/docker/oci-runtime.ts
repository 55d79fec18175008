import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { PROBE_LABEL } from './docker-labels.ts';

/** The runtime `auto` prefers: it starts a container sooner than runc with the same isolation (docs/benchmarks.md). */
export const PREFERRED_RUNTIME = 'crun';

/**
 * Runtimes that run the container's processes on the host kernel in namespaces (binds, files written into a
 * running container and cgroups behave as under runc); anything else (gVisor's runsc) is a sandboxing kernel.
 */
const HOST_KERNEL_RUNTIMES = new Set(['', 'runc', 'crun', 'io.containerd.runc.v2']);

export function isHostKernelRuntime(runtime: string): boolean {
  return HOST_KERNEL_RUNTIMES.has(runtime);
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Starts one throwaway container of `image` under `runtime` with the sandboxes' limits (`hostConfig`: memory, pids,
 * capabilities) and no network, and removes it. Resolves with undefined when it started, else with the engine's
 * reason (crun refuses every container on a host with cgroups in hybrid mode whose v2 hierarchy holds controllers).
 */
export async function runtimeStartProblem(docker: Docker, runtime: string, image: string, hostConfig: Docker.HostConfig): Promise<string | undefined> {
  let probe: Docker.Container | undefined;
  try {
    probe = await docker.createContainer({
      Image: image,
      Entrypoint: ['/opt/tidepool/bin/tini', '--version'],
      Cmd: [],
      Labels: { [PROBE_LABEL]: 'runtime' },
      HostConfig: { ...hostConfig, Runtime: runtime, NetworkMode: 'none', AutoRemove: false },
    });
    await probe.start();
    return undefined;
  } catch (error) {
    return errorMessage(error);
  } finally {
    await probe?.remove({ force: true }).catch(() => undefined);
  }
}

/** What to do when a runtime is not registered with the engine. */
export function missingRuntimeAdvice(runtime: string): string {
  if (runtime === 'runsc') {
    return "Install gVisor (Debian: apt-get install runsc), register it with the engine ('runsc install' adds it to /etc/docker/daemon.json) and reload dockerd, or set TIDEPOOL_CONTAINER_RUNTIME=auto";
  }
  if (runtime === PREFERRED_RUNTIME) {
    return 'Install crun (Debian: apt-get install crun) and run scripts/ensure-docker.sh as root (it registers crun in /etc/docker/daemon.json and reloads dockerd), or set TIDEPOOL_CONTAINER_RUNTIME=auto';
  }
  return 'Register it in /etc/docker/daemon.json ("runtimes") and reload dockerd, or set TIDEPOOL_CONTAINER_RUNTIME=auto';
}

/**
 * The runtime containers start with for the setting (`auto`, '' or a name), checked against the engine once at
 * startup: a named runtime must be registered (else it throws with what to do); crun, named or picked by `auto`,
 * must also start a container with the sandboxes' limits when `probeImage` is given. `auto` falls back to the
 * engine's default ('') with one warning saying why; a named crun that cannot start one fails startup.
 */
export async function chooseRuntime(
  docker: Docker,
  logger: Logger,
  setting: string,
  known: string[],
  probe: { image: string | undefined; hostConfig: Docker.HostConfig },
): Promise<string> {
  if (setting !== 'auto') {
    if (setting && !known.includes(setting)) {
      throw new Error(`TIDEPOOL_CONTAINER_RUNTIME is '${setting}' but the Docker engine knows only the runtimes ${known.join(', ') || '(none)'}. ${missingRuntimeAdvice(setting)}`);
    }
    const problem = setting === PREFERRED_RUNTIME && probe.image ? await runtimeStartProblem(docker, setting, probe.image, probe.hostConfig) : undefined;
    if (problem) throw new Error(`TIDEPOOL_CONTAINER_RUNTIME is 'crun' but crun cannot start a container here (${problem.slice(0, 300)}); set TIDEPOOL_CONTAINER_RUNTIME=auto or runc`);
    if (setting) logger.info({ runtime: setting }, 'sandboxes run with the configured container runtime');
    return setting;
  }
  if (!known.includes(PREFERRED_RUNTIME)) {
    logger.info({ engineRuntimes: known }, "sandboxes run with the engine's default runtime: it has no crun registered (scripts/ensure-docker.sh registers an installed crun)");
    return '';
  }
  const problem = probe.image ? await runtimeStartProblem(docker, PREFERRED_RUNTIME, probe.image, probe.hostConfig) : undefined;
  if (problem) {
    logger.warn({ err: problem.slice(0, 500) }, "crun is registered but cannot start a container here; sandboxes run with the engine's default runtime (TIDEPOOL_CONTAINER_RUNTIME=auto)");
    return '';
  }
  logger.info({ runtime: PREFERRED_RUNTIME }, 'sandboxes run with crun (TIDEPOOL_CONTAINER_RUNTIME=auto)');
  return PREFERRED_RUNTIME;
}
