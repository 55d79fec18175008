import type { Logger } from 'pino';
import type { EnvdDial } from '../../envd/envd-client.ts';
import type { EgressPolicy, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { type BootEnvd, type BootedSandbox, readySandbox } from '../lifecycle/sandbox-boot.ts';
import { egressPolicy } from '../egress/network-rules.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { PooledContainer } from './warm-pool.ts';

/** No rules at all: what a pooled container was started with, so there is nothing to change at claim. */
export function isOpenPolicy(policy: EgressPolicy): boolean {
  return policy.allow.length === 0 && policy.deny.length === 0 && (policy.domains ?? []).length === 0 && policy.transforms === undefined && !policy.upstream;
}

/**
 * Turns a warm-pool container into the record's sandbox without restarting it: the record's egress rules
 * (keyed by the container's address, as for a cold start), then `/init` (environment, user, workdir —
 * authenticated with the token envd was born with, which is this sandbox id's own) unless the warm-up's
 * `/init` already said the same, and the template's start command unless it already runs (started while warming). On any failure the container is removed
 * before the error propagates: a half-claimed container never goes back to the pool.
 */
export async function claimPooled(envd: Pick<BootEnvd, 'initEnvd' | 'runStartCommand'>, runtime: SandboxRuntime, record: SandboxRecord, pooled: PooledContainer, logger: Logger, openPassword?: (sealed: string) => string, dial?: EnvdDial): Promise<BootedSandbox> {
  try {
    const policy = egressPolicy(record.network, openPassword);
    if (!isOpenPolicy(policy)) await runtime.applyEgress?.(record.sandboxId, pooled.address, policy);
    const envdVersion = await readySandbox(envd, pooled.address, record, logger, pooled.initialised, pooled.startCommandRunning, dial);
    return { containerId: pooled.containerId, address: pooled.address, envdVersion };
  } catch (error) {
    logger.warn({ err: error, containerId: pooled.containerId }, 'warm-pool container could not be claimed; removing it');
    await runtime.remove(pooled.containerId).catch((removeError: unknown) => logger.error({ err: removeError, containerId: pooled.containerId }, 'could not remove a warm-pool container after a failed claim'));
    throw error;
  }
}
