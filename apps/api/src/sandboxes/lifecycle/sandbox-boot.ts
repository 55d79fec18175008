import type { Logger } from 'pino';
import { type EnvdDial, type EnvdInit, type InitialisedEnvd, sameInit } from '../../envd/envd-client.ts';
import { PlatformError } from '../../errors.ts';
import type { EnvdCalls } from '../envd-calls.ts';
import { PhaseClock } from '../../observability/phase-clock.ts';
import { bootContainer } from '../../runtime/container-boot.ts';
import type { BootedContainer, ContainerSpec, DirectoryMount, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { SandboxDefaults } from '../../templates/template-model.ts';
import { egressTrustEnv } from '../egress/egress-trust.ts';
import { egressPolicy } from '../egress/network-rules.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

export { ENVD_READY_TIMEOUT_MS } from '../../runtime/container-boot.ts';

/** The envd calls a boot makes: the real ones in the platform, fakes in unit tests. */
export type BootEnvd = Pick<EnvdCalls, 'waitForEnvd' | 'initEnvd' | 'runStartCommand'>;

export type BootedSandbox = BootedContainer;

/** What envd is told on `/init`: the template's environment below the sandbox's own, user and workdir. */
export function envdInitOf(defaults: SandboxDefaults, envVars: Record<string, string>, accessToken: string): EnvdInit {
  return { envVars: { ...defaults.envs, ...envVars }, accessToken, defaultUser: defaults.user, defaultWorkdir: defaults.workdir ?? '' };
}

/** The `/init` of this sandbox. */
export function initFor(record: SandboxRecord): EnvdInit {
  return envdInitOf(record.defaults, { ...egressTrustEnv(record.network), ...record.envVars }, record.envdAccessToken);
}

/**
 * Starts a container for the record from `image`, ready with envd initialised (container-boot.ts: on a node agent
 * that whole boot is one call, run on the node), then the template's start command. Returns when the sandbox is
 * usable; on any failure the container is removed before the error propagates.
 */
export async function bootSandbox(envd: BootEnvd, runtime: SandboxRuntime, record: SandboxRecord, image: string, logger: Logger, directories: DirectoryMount[] = [], dial?: EnvdDial, openPassword?: (sealed: string) => string): Promise<BootedSandbox> {
  const phases = new PhaseClock();
  const spec: ContainerSpec = {
    sandboxId: record.sandboxId,
    templateId: record.templateId,
    image,
    cpuCount: record.cpuCount,
    memoryMB: record.memoryMB,
    egress: egressPolicy(record.network, openPassword),
    envdAccessToken: record.envdAccessToken,
    envdVersion: record.envdVersion,
    directories,
  };
  // The token travels in the spec only (envd has it from birth); `/init` presents that one.
  const { envVars, defaultUser, defaultWorkdir } = initFor(record);
  const init = { envVars, defaultUser, defaultWorkdir };
  const booted = runtime.bootContainer ? await runtime.bootContainer(spec, init) : await bootContainer(runtime, spec, init, logger, dial, envd);
  phases.mark('boot');
  try {
    await envd.runStartCommand(booted.address, record.envdAccessToken, record.defaults, logger, dial);
    phases.mark('startCommand');
    logger.debug({ containerId: booted.containerId, address: booted.address, phasesMs: phases.done() }, 'sandbox ready');
    return booted;
  } catch (error) {
    logger.warn({ err: error }, 'the template start command failed; removing the sandbox container');
    await runtime.remove(booted.containerId);
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
