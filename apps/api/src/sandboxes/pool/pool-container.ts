import type { Logger } from 'pino';
import type { EnvdDial, InitialisedEnvd } from '../../envd/envd-client.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { SandboxDefaults } from '../../templates/template-model.ts';
import type { EnvdCalls } from '../envd-calls.ts';
import { ENVD_READY_TIMEOUT_MS, envdInitOf } from '../lifecycle/sandbox-boot.ts';
import { envdAccessToken } from '../sandbox-identity.ts';

/**
 * A container started ahead of demand, envd answering, not yet anyone's sandbox. It was created exactly
 * as a cold sandbox with this id would be (name, hostname, labels, environment, hardening, network), so
 * claiming it only has to tell envd who it now serves. Its envd was born with this id's own access token:
 * only the platform (which derives it) can `/init` it, and the isolation rules keep neighbours from even
 * reaching it; the proxy does not route to it (no sandbox record names it).
 */
export interface PooledContainer {
  sandboxId: string;
  containerId: string;
  address: string;
  key: string;
  templateId: string;
  /** envd was told the `/init` of a sandbox of the template without env vars of its own while it warmed. */
  initialised: InitialisedEnvd;
  /**
   * The template's start command was started (and its ready command passed) while the container warmed, with
   * the warm-up's `/init`: only a create without env vars of its own may claim the container.
   */
  startCommandRunning: boolean;
  /** Gives back the slot the container holds under the sandbox limit (once its sandbox record holds it, or it is gone). */
  release(): void;
}

/** What the pool starts containers of: one template build at one cpu and memory size. */
export interface PoolTemplate {
  key: string;
  /** The template reference the pool resolves again to notice rebuilds and removals. */
  reference: string;
  templateId: string;
  image: string;
  cpuCount: number;
  memoryMB: number;
  /** The build's defaults (user, workdir, environment): what envd is initialised with while it warms. */
  defaults: SandboxDefaults;
}

export interface WarmStartDeps {
  runtime: SandboxRuntime;
  /** What warming a container says to its envd: the real calls in the platform, fakes in unit tests. */
  envd: Pick<EnvdCalls, 'waitForEnvd' | 'primeEnvd' | 'initEnvd' | 'runStartCommand'>;
  tokenSeed: string;
  /** How the node's containers are reached (a node agent's tunnel); undefined: directly from this process. */
  dial?: EnvdDial;
  /** Makes the image present on the node first (pulled from the cluster's registry where it lacks it). */
  ensureImage?(runtime: SandboxRuntime, image: string, log: Logger): Promise<void>;
}

/**
 * Starts one container of `template` with this sandbox id exactly as a cold sandbox would be started, waits
 * for its envd, runs the priming command, `/init`s it as for a create without env vars of its own and starts the
 * template's start command. On any failure the container is removed before the error propagates.
 */
export async function startPooledContainer(deps: WarmStartDeps, template: PoolTemplate, sandboxId: string, release: () => void, log: Logger): Promise<PooledContainer> {
  const { runtime, dial, envd } = deps;
  const token = envdAccessToken(deps.tokenSeed, sandboxId);
  await deps.ensureImage?.(runtime, template.image, log);
  const started = await runtime.startContainer({
    sandboxId,
    templateId: template.templateId,
    image: template.image,
    cpuCount: template.cpuCount,
    memoryMB: template.memoryMB,
    egress: { allow: [], deny: [] },
    envdAccessToken: token,
    pool: template.key,
  });
  try {
    await Promise.all([
      envd.waitForEnvd(started.address, ENVD_READY_TIMEOUT_MS, async () => (await runtime.inspect(started.containerId)).status === 'running', dial),
      started.egressApplied,
    ]);
    await envd.primeEnvd(started.address, token, template.defaults.user, log, dial);
    // What a create without env vars of its own would send: such a claim skips its /init.
    const init = envdInitOf(template.defaults, {}, token);
    const initialised: InitialisedEnvd = { init, envdVersion: await envd.initEnvd(started.address, init, dial) };
    // The start command too (a server that takes seconds to come up, like the code interpreter's), so a claim
    // that keeps this /init finds the sandbox ready at once.
    await envd.runStartCommand(started.address, token, template.defaults, log, dial);
    const startCommandRunning = Boolean(template.defaults.startCmd || template.defaults.readyCmd);
    return { sandboxId, containerId: started.containerId, address: started.address, key: template.key, templateId: template.templateId, initialised, startCommandRunning, release };
  } catch (error) {
    await runtime.remove(started.containerId).catch(() => undefined);
    throw error;
  }
}
