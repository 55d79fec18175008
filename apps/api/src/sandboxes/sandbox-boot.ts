import type { Logger } from 'pino';
import { type EnvdInit, initEnvd, waitForEnvd } from '../envd/envd-client.ts';
import type { SandboxRuntime, StartedContainer } from '../runtime/sandbox-runtime.ts';
import type { SandboxRecord } from './sandbox-record.ts';

/** How long a new container may take before envd answers. */
const ENVD_READY_TIMEOUT_MS = 30_000;

export interface BootedSandbox extends StartedContainer {
  envdVersion: string;
}

/** What envd is told on `/init`: the template's environment below the sandbox's own, user and workdir. */
export function initFor(record: SandboxRecord): EnvdInit {
  return {
    envVars: { ...record.defaults.envs, ...record.envVars },
    accessToken: record.envdAccessToken,
    defaultUser: record.defaults.user,
    defaultWorkdir: record.defaults.workdir ?? '',
  };
}

/**
 * Starts a container for the record from `image`, waits for envd and initialises it. Returns when
 * the sandbox is usable; on any failure the container is removed before the error propagates.
 */
export async function bootSandbox(runtime: SandboxRuntime, record: SandboxRecord, image: string, logger: Logger): Promise<BootedSandbox> {
  const started = await runtime.startContainer({
    sandboxId: record.sandboxId,
    templateId: record.templateId,
    image,
    cpuCount: record.cpuCount,
    memoryMB: record.memoryMB,
  });
  try {
    await waitForEnvd(started.address, ENVD_READY_TIMEOUT_MS, async () => (await runtime.inspect(started.containerId)).status === 'running');
    const envdVersion = await initEnvd(started.address, initFor(record), false);
    logger.debug({ containerId: started.containerId, address: started.address }, 'sandbox container ready');
    return { ...started, envdVersion };
  } catch (error) {
    logger.warn({ err: error }, 'sandbox failed to boot; removing its container');
    await runtime.remove(started.containerId);
    throw error;
  }
}
