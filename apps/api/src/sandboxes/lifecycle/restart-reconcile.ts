import type { Logger } from 'pino';
import type { MetricsSink } from '../../observability/metrics-sink.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';

export interface ReconcileDeps {
  registry: SandboxRegistry;
  /** The engine of one node, and the stored records that name that node. */
  runtime: SandboxRuntime;
  records: SandboxRecord[];
  /** Containers of these sandbox ids are left alone (creations in flight, the warm pool's). */
  keep?: (sandboxId: string) => boolean;
  /** Warm-pool containers without a record are left alone too (a remote node's: its pool holder removes leftovers). */
  keepPooled?: boolean;
  logger: Logger;
  /** A sandbox adopted as running: arm its timer (one that ran out while the platform was down fires at once). */
  adopted(record: SandboxRecord): void;
  /** Counts the orphans removed. */
  metrics?: MetricsSink;
}

/**
 * Runs `work` on the record as read. With a shared database under the lock every replica takes, and only when the
 * stored record is still the one read before the engine was listed: one that changed since is another replica's
 * live work (its container may be newer than the listing), not a leftover.
 */
async function exclusively(registry: SandboxRegistry, record: SandboxRecord, work: (current: SandboxRecord) => Promise<void>): Promise<void> {
  if (!registry.isShared) return work(record);
  await registry.serial(record.sandboxId, async () => {
    const current = registry.peek(record.sandboxId);
    const unchanged = current && (['nodeId', 'state', 'containerId', 'pausedImage'] as const).every((key) => current[key] === record[key]);
    if (current && unchanged) await work(current);
  });
}

/** Brings the store and one node's engine back in line after a restart (even after SIGKILL) or the node's return. */
export async function reconcileAfterRestart({ registry, runtime, records, keep, keepPooled, logger, adopted, metrics }: ReconcileDeps): Promise<void> {
  const containers = new Map((await runtime.listManaged()).map((c) => [c.sandboxId, c]));
  const sandboxImages = await runtime.listSandboxImages();
  for (const stored of records) {
    const container = containers.get(stored.sandboxId);
    containers.delete(stored.sandboxId);
    await exclusively(registry, stored, async (record) => {
      const log = logger.child({ sandboxId: record.sandboxId });
      if (record.state === 'paused' && record.pausedImage) {
        // Paused to the filesystem: the image is the sandbox; a container left over from the pause is not.
        if (container) await runtime.remove(container.containerId);
        if (!(await runtime.imageExists(record.pausedImage))) {
          await registry.forget(record.sandboxId);
          log.warn({ image: record.pausedImage }, 'paused sandbox image is gone; dropping its record');
          return;
        }
        record.containerId = null;
        record.address = null;
        await registry.persist(record);
        log.info({ state: record.state }, 'paused sandbox adopted after restart');
        return;
      }
      if (!container || container.status === 'missing' || container.status === 'stopped') {
        if (container) await runtime.remove(container.containerId);
        await runtime.removeSandboxImage(record.sandboxId);
        await registry.forget(record.sandboxId);
        log.warn({ containerStatus: container?.status ?? 'missing' }, 'sandbox container is gone or stopped; dropping its record');
        return;
      }
      record.containerId = container.containerId;
      record.address = container.address ?? record.address;
      if (record.state === 'paused' && container.status === 'running') await runtime.pause(container.containerId);
      if (record.state === 'running' && container.status === 'paused') {
        // Crashed between freezing and recording the pause: it is paused now.
        record.state = 'paused';
        record.pausedAt = new Date().toISOString();
      }
      await registry.persist(record);
      adopted(record);
      log.info({ state: record.state, endAt: record.endAt }, 'sandbox adopted after restart');
    });
  }
  for (const orphan of containers.values()) {
    const log = logger.child({ sandboxId: orphan.sandboxId });
    if (keep?.(orphan.sandboxId) || (keepPooled && orphan.pooled) || (await registry.known(orphan.sandboxId))) continue;
    if (orphan.unclaimed) {
      log.debug({ containerId: orphan.containerId }, 'leaving a sandbox container of no known platform alone');
      continue;
    }
    // A warm-pool container of the previous run is removed, not adopted: one whose claim was cut short
    // may already hold another request's environment, and nothing tells it apart. The pool refills.
    if (orphan.pooled) log.info({ containerId: orphan.containerId }, 'removing a warm-pool container left by the previous run');
    else log.warn({ containerId: orphan.containerId }, 'removing container without a sandbox record');
    await runtime.remove(orphan.containerId);
    metrics?.orphansRemoved(orphan.pooled ? 'pool_container' : 'container');
  }
  for (const { image, sandboxId } of sandboxImages) {
    if (keep?.(sandboxId) || (await registry.known(sandboxId))) continue;
    logger.warn({ image, sandboxId }, 'removing sandbox image without a sandbox record');
    await runtime.removeImage(image);
    metrics?.orphansRemoved('sandbox_image');
  }
}
