/**
 * A sandbox container from nothing to ready: started, envd listening and answering `/health`, told its `/init`. The
 * one boot every node runs: the embedded node in the API process, a node agent inside its `bootContainer` call (envd
 * reached on the node itself, so no probe, tunnel or `/init` crosses the node channel). Whatever fails after the
 * start removes the container before the error goes on: nothing is left half-made.
 */
import type { Logger } from 'pino';
import { type EnvdDial, type EnvdInit, initEnvd, waitForEnvd } from '../envd/envd-client.ts';
import { PhaseClock } from '../observability/phase-clock.ts';
import type { BootedContainer, ContainerSpec, SandboxRuntime } from './sandbox-runtime.ts';

/** The envd calls of a boot (the real ones by default; unit tests of the lifecycle pass fakes). */
export interface ContainerBootEnvd {
  waitForEnvd: typeof waitForEnvd;
  initEnvd: typeof initEnvd;
}

const REAL_ENVD: ContainerBootEnvd = { waitForEnvd, initEnvd };

/** How long a new container may take before envd answers. */
export const ENVD_READY_TIMEOUT_MS = 30_000;

/**
 * Starts `spec` on `runtime`, waits for envd (and the container's egress rules) and sends `init` with the spec's own
 * token. `dial`: how envd is reached when it is not directly (none on the node that runs the container).
 */
export async function bootContainer(runtime: SandboxRuntime, spec: ContainerSpec, init: Omit<EnvdInit, 'accessToken'>, logger: Logger, dial?: EnvdDial, envd: ContainerBootEnvd = REAL_ENVD): Promise<BootedContainer> {
  const phases = new PhaseClock();
  const started = await runtime.startContainer(spec);
  phases.mark('container');
  try {
    await Promise.all([
      envd.waitForEnvd(started.address, ENVD_READY_TIMEOUT_MS, async () => (await runtime.inspect(started.containerId)).status === 'running', dial),
      started.egressApplied,
    ]);
    phases.mark('envd');
    const envdVersion = await envd.initEnvd(started.address, { ...init, accessToken: spec.envdAccessToken }, dial);
    phases.mark('init');
    logger.debug({ containerId: started.containerId, address: started.address, phasesMs: phases.done() }, 'sandbox container ready');
    return { containerId: started.containerId, address: started.address, envdVersion };
  } catch (error) {
    logger.warn({ err: error, containerId: started.containerId }, 'sandbox failed to boot; removing its container');
    await runtime.remove(started.containerId).catch((removal: unknown) => logger.error({ err: removal, containerId: started.containerId }, 'removing a container that failed to boot failed'));
    throw error;
  }
}
