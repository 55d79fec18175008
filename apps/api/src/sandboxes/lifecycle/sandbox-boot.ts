import type { Logger } from 'pino';
import { type EnvdDial, type EnvdInit, type InitialisedEnvd, sameInit } from '../../envd/envd-client.ts';
import { PlatformError } from '../../errors.ts';
import type { EnvdCalls } from '../envd-calls.ts';
import { PhaseClock } from '../../observability/phase-clock.ts';
import type { DirectoryMount, SandboxRuntime, StartedContainer } from '../../runtime/sandbox-runtime.ts';
import type { SandboxDefaults } from '../../templates/template-model.ts';
import { egressTrustEnv } from '../egress/egress-trust.ts';
import { egressPolicy } from '../egress/network-rules.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

/** How long a new container may take before envd answers. */
export const ENVD_READY_TIMEOUT_MS = 30_000;

/** The envd calls a boot makes: the real ones in the platform, fakes in unit tests. */
export type BootEnvd = Pick<EnvdCalls, 'waitForEnvd' | 'initEnvd' | 'runStartCommand'>;

export interface BootedSandbox extends StartedContainer {
  envdVersion: string;
}

/** What envd is told on `/init`: the template's environment below the sandbox's own, user and workdir. */
export function envdInitOf(defaults: SandboxDefaults, envVars: Record<string, string>, accessToken: string): EnvdInit {
  return { envVars: { ...defaults.envs, ...envVars }, accessToken, defaultUser: defaults.user, defaultWorkdir: defaults.workdir ?? '' };
}

/** The `/init` of this sandbox. */
export function initFor(record: SandboxRecord): EnvdInit {
  return envdInitOf(record.defaults, { ...egressTrustEnv(record.network), ...record.envVars }, record.envdAccessToken);
}

/**
 * Starts a container for the record from `image`, waits for envd and initialises it. Returns when
 * the sandbox is usable; on any failure the container is removed before the error propagates.
 */
export async function bootSandbox(envd: BootEnvd, runtime: SandboxRuntime, record: SandboxRecord, image: string, logger: Logger, directories: DirectoryMount[] = [], dial?: EnvdDial, openPassword?: (sealed: string) => string): Promise<BootedSandbox> {
  const phases = new PhaseClock();
  const started = await runtime.startContainer({
    sandboxId: record.sandboxId,
    templateId: record.templateId,
    image,
    cpuCount: record.cpuCount,
    memoryMB: record.memoryMB,
    egress: egressPolicy(record.network, openPassword),
    envdAccessToken: record.envdAccessToken,
    envdVersion: record.envdVersion,
    directories,
  });
  phases.mark('container');
  try {
    await Promise.all([
      envd.waitForEnvd(started.address, ENVD_READY_TIMEOUT_MS, async () => (await runtime.inspect(started.containerId)).status === 'running', dial),
      started.egressApplied,
    ]);
    phases.mark('envd');
    const envdVersion = await readySandbox(envd, started.address, record, logger, undefined, false, dial);
    phases.mark('init');
    logger.debug({ containerId: started.containerId, address: started.address, phasesMs: phases.done() }, 'sandbox container ready');
    return { ...started, envdVersion };
  } catch (error) {
    logger.warn({ err: error }, 'sandbox failed to boot; removing its container');
    await runtime.remove(started.containerId);
    throw error;
  }
}

/**
 * Makes a started container (envd answering) the record's sandbox: `/init` (environment, user, workdir;
 * envd has had its token since birth and /init presents it like any other call), then the template's
 * start command. Cold boots and warm-pool claims both end here. A warm-pool envd that was already told
 * exactly this `/init` while it warmed (a create without env vars of its own) is not told again.
 * Returns envd's version.
 */
export async function readySandbox(envd: Pick<BootEnvd, 'initEnvd' | 'runStartCommand'>, address: string, record: SandboxRecord, logger: Logger, initialised?: InitialisedEnvd, startCommandRunning = false, dial?: EnvdDial): Promise<string> {
  const init = initFor(record);
  const unchanged = initialised !== undefined && sameInit(initialised.init, init);
  // A start command begun while the container warmed saw the warm-up's environment: only a claim with the
  // same /init may keep it (the lifecycle does not offer such containers to other creates; this is the guard).
  if (startCommandRunning && !unchanged) throw new PlatformError('internal', 'a warm-pool container whose start command already runs was offered to a create with another environment');
  const envdVersion = unchanged ? initialised.envdVersion : await envd.initEnvd(address, init, dial);
  if (!startCommandRunning) await envd.runStartCommand(address, record.envdAccessToken, record.defaults, logger, dial);
  return envdVersion;
}
