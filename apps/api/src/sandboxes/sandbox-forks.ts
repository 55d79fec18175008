import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { invalid, PlatformError } from '../errors.ts';
import { newSandboxId } from './sandbox-identity.ts';
import type { SandboxLifecycle } from './sandbox-lifecycle.ts';
import type { SandboxRecord } from './sandbox-record.ts';

export const MAX_FORKS = 100;

export interface ForkDeps {
  lifecycle: SandboxLifecycle;
  logger: Logger;
}

export type ForkResult = { ok: true; record: SandboxRecord } | { ok: false; error: PlatformError };

/**
 * `POST /sandboxes/{id}/fork`: checkpoints the source's filesystem (the source keeps running) and starts
 * `count` new sandboxes from it with the source's template, metadata, envs, network and lifecycle settings.
 * Memory and running processes are not carried over on this runtime. One result per fork, like allSettled.
 */
export async function forkSandbox(deps: ForkDeps, sourceId: string, count: number, timeoutSeconds: number): Promise<ForkResult[]> {
  if (!Number.isInteger(count) || count < 1 || count > MAX_FORKS) throw invalid(`count must be between 1 and ${MAX_FORKS}`);
  // The checkpoint is named like a sandbox image, so a crash before it is dropped leaves nothing: restart reconcile removes it.
  const checkpointOwner = `fork${randomBytes(8).toString('hex')}`;
  const { source, checkpoint } = await deps.lifecycle.withSandbox(sourceId, async (record) => {
    const runtime = deps.lifecycle.nodes.runtime(record.nodeId);
    const image = record.containerId
      ? await runtime.commitSandbox(record.containerId, checkpointOwner)
      : await runtime.claimSandboxImage(record.pausedImage!, checkpointOwner);
    return { source: { ...record }, checkpoint: image };
  });
  // The checkpoint is an image on the source's node: the forks start there.
  const runtime = deps.lifecycle.nodes.runtime(source.nodeId);
  const release = deps.lifecycle.registry.reserveSlots(count);
  try {
    return await Promise.all(
      Array.from({ length: count }, async (): Promise<ForkResult> => {
        const sandboxId = newSandboxId();
        try {
          const image = await runtime.claimSandboxImage(checkpoint, sandboxId);
          const record = await deps.lifecycle.launch(
            {
              sandboxId,
              nodeId: source.nodeId,
              image,
              from: source,
              settings: {
                teamId: source.teamId,
                timeoutSeconds,
                autoPause: source.autoPause,
                autoPauseMemory: source.autoPauseMemory,
                autoResume: source.autoResume,
                metadata: { ...source.metadata },
                envVars: { ...source.envVars },
                network: { ...source.network },
                allowInternetAccess: source.allowInternetAccess,
                // The same volumes (shared, not copied): a fork sees what its source sees at those paths.
                volumeMounts: source.volumeMounts.map((m) => ({ ...m })),
              },
              event: `sandbox forked from ${source.sandboxId}`,
            },
            release,
          );
          return { ok: true, record };
        } catch (error) {
          await runtime.removeSandboxImage(sandboxId).catch(() => undefined);
          deps.logger.warn({ sandboxId, sourceId, err: error }, 'fork failed');
          return { ok: false, error: error instanceof PlatformError ? error : new PlatformError('internal', error instanceof Error ? error.message : String(error)) };
        }
      }),
    );
  } finally {
    release();
    await runtime.removeSandboxImage(checkpointOwner).catch(() => undefined);
  }
}
