import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { invalid, PlatformError } from '../../errors.ts';
import { ForkCheckpoint } from './fork-checkpoint.ts';
import { newSandboxId } from '../sandbox-identity.ts';
import type { SandboxLifecycle } from './sandbox-lifecycle.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxSlots } from '../registry/sandbox-slots.ts';
import type { ClusterImages } from '../../nodes/cluster-images.ts';

export const MAX_FORKS = 100;

export interface ForkDeps {
  lifecycle: SandboxLifecycle;
  /** A fork call takes its forks' slots at once. */
  slots: Pick<SandboxSlots, 'reserveSlots'>;
  /** The cluster registry (forks placed off the source's node pull the checkpoint from it). */
  images: ClusterImages;
  logger: Logger;
}

export type ForkResult = { ok: true; record: SandboxRecord } | { ok: false; error: PlatformError };

/**
 * `POST /sandboxes/{id}/fork`: checkpoints the source's filesystem (the source keeps running) and starts
 * `count` new sandboxes from it with the source's template, metadata, envs, network and lifecycle settings.
 * Memory and running processes are not carried over on this runtime. One result per fork, like allSettled.
 * Without a registry (or mounting volumes, which live on the source's node) every fork starts on the source's node,
 * where the checkpoint is. With one, each fork is placed like a create (the source's node whenever it has room; nodes
 * that cannot apply the source's network rules left out) and a fork placed elsewhere pulls the checkpoint, which the
 * source's node pushes once for the call (fork-checkpoint.ts).
 */
export async function forkSandbox(deps: ForkDeps, sourceId: string, count: number, timeoutSeconds: number): Promise<ForkResult[]> {
  if (!Number.isInteger(count) || count < 1 || count > MAX_FORKS) throw invalid(`count must be between 1 and ${MAX_FORKS}`);
  const { lifecycle, images } = deps;
  // The checkpoint is named like a sandbox image, so a crash before it is dropped leaves nothing: restart reconcile removes it.
  const checkpointOwner = `fork${randomBytes(8).toString('hex')}`;
  const { source, image, placed, excluded } = await lifecycle.withSandbox(sourceId, async (record) => {
    const placed = images.enabled && record.volumeMounts.length === 0;
    // Refused (nothing made) when no node could apply the source's network rules.
    const excluded = placed ? await lifecycle.egressExcluded(record.network) : undefined;
    const runtime = lifecycle.nodes.runtime(record.nodeId);
    const image = record.containerId
      ? await runtime.commitSandbox(record.containerId, checkpointOwner)
      : await runtime.claimSandboxImage(record.pausedImage!, checkpointOwner);
    return { source: { ...record }, image, placed, excluded };
  });
  const checkpoint = new ForkCheckpoint({ nodes: lifecycle.nodes, images, logger: deps.logger }, source.sandboxId, source.nodeId, image, checkpointOwner);
  const release = deps.slots.reserveSlots(count);
  try {
    return await Promise.all(
      Array.from({ length: count }, async (): Promise<ForkResult> => {
        const sandboxId = newSandboxId();
        try {
          const record = await lifecycle.launch(
            {
              sandboxId,
              nodeId: placed ? undefined : source.nodeId,
              preferredNode: source.nodeId,
              excluded,
              image,
              imageOn: (node) => checkpoint.claimOn(node, sandboxId),
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
          await checkpoint.release(sandboxId, record.nodeId);
          if (record.nodeId !== source.nodeId) deps.logger.info({ sandboxId, sourceId, from: source.nodeId, to: record.nodeId }, "fork started on another node than its source's");
          return { ok: true, record };
        } catch (error) {
          await checkpoint.release(sandboxId);
          deps.logger.warn({ sandboxId, sourceId, err: error }, 'fork failed');
          return { ok: false, error: error instanceof PlatformError ? error : new PlatformError('internal', error instanceof Error ? error.message : String(error)) };
        }
      }),
    );
  } finally {
    release();
    await checkpoint.dispose();
  }
}
