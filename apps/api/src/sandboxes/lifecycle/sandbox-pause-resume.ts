import type { Logger } from 'pino';
import { PlatformError } from '../../errors.ts';
import type { NodeSet } from '../../nodes/node-set.ts';
import type { DirectoryMount, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { EnvdDial } from '../../envd/envd-client.ts';
import { initFor } from './sandbox-boot.ts';
import type { SandboxBoot } from './boot-calls.ts';
import type { EnvdCalls } from '../envd-calls.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';
import type { SandboxTimers } from './sandbox-timers.ts';
import type { ClusterImages } from '../../nodes/cluster-images.ts';
import { startOnPlacedNode } from '../../nodes/placed-start.ts';
import type { BootedSandbox } from './sandbox-boot.ts';
import { inSeconds, nowIso } from './wall-clock.ts';

/** What pausing and resuming a sandbox work with (the lifecycle holds them; the caller serialises per sandbox). */
export interface PauseResumeContext {
  registry: SandboxRegistry;
  nodes: NodeSet;
  timers: SandboxTimers;
  logger: Logger;
  /** Timeout of a sandbox resumed without one and without a usable timeout of its own. */
  defaultTimeoutSeconds: number;
  /** One slot under the sandbox limit and its team's quota (a filesystem resume makes a container), held until its record says so. */
  reserveSlot(record: SandboxRecord): Promise<() => void>;
  /** Bind mounts of the sandbox's volumes. */
  directoriesOf(record: SandboxRecord): Promise<DirectoryMount[]>;
  /** Opens a sealed `network.egressProxy` password for the node's dialer (egressPolicy). */
  openProxyPassword(sealed: string): string;
  /** A sandbox with network.rules trusts its egress CA again once it runs (idempotent). */
  trustEgressCa(record: SandboxRecord): Promise<void>;
  /** The cluster registry: a filesystem pause is pushed there, so the sandbox can resume on any node with room. */
  images: ClusterImages;
  /** A filesystem resume boots a container cold. */
  boot: SandboxBoot;
  /** A thaw tells envd the sandbox's settings again. */
  envd: Pick<EnvdCalls, 'initEnvd'>;
}

/** Freezes the sandbox on its node (`keepMemory`), or commits its filesystem there and removes the container. */
export async function pauseSandbox(ctx: PauseResumeContext, record: SandboxRecord, keepMemory: boolean): Promise<void> {
  ctx.timers.clear(record.sandboxId);
  const containerId = record.containerId!;
  const runtime = ctx.nodes.runtime(record.nodeId);
  if (keepMemory) {
    await runtime.pause(containerId);
    record.state = 'paused';
    record.pausedAt = nowIso();
    await ctx.registry.persist(record, 'sandbox paused');
  } else {
    // Record the image before the container goes, so a crash in between leaves a resumable sandbox.
    record.pausedImage = await runtime.commitSandbox(containerId, record.sandboxId);
    record.state = 'paused';
    record.pausedAt = nowIso();
    await ctx.registry.persist(record);
    await runtime.remove(containerId);
    record.containerId = null;
    record.address = null;
    if (ctx.images.enabled) {
      // In the registry the filesystem can resume on any node; a failed push keeps it resumable here only.
      try {
        record.pausedImage = await ctx.images.publish(runtime, record.pausedImage, 'sandbox', record.sandboxId);
      } catch (error) {
        ctx.logger.child({ sandboxId: record.sandboxId, nodeId: record.nodeId }).warn({ err: error }, 'paused filesystem not pushed to the registry; it resumes on its own node only');
      }
    }
    await ctx.registry.persist(record, 'sandbox paused (filesystem only)');
  }
  ctx.logger.child({ sandboxId: record.sandboxId, nodeId: record.nodeId }).info({ keepMemory }, 'sandbox paused');
}

/** Thaws a frozen sandbox on its node, or cold-boots one paused to its filesystem (on its node, or any node when its image is in the registry); a fresh timeout window starts. */
export async function resumeSandbox(ctx: PauseResumeContext, record: SandboxRecord, requestedTimeout: number | undefined): Promise<SandboxRecord> {
  const log = ctx.logger.child({ sandboxId: record.sandboxId, nodeId: record.nodeId });
  const own = record.timeoutSeconds > 0 ? record.timeoutSeconds : ctx.defaultTimeoutSeconds;
  const timeoutSeconds = requestedTimeout !== undefined && requestedTimeout > 0 ? requestedTimeout : own;
  // A registry image the resume started from: removed from the registry once the sandbox runs.
  let pulled: string | undefined;
  // A filesystem resume's slot is released once the record holds the container (or the resume failed): never uncounted.
  let release = (): void => undefined;
  try {
    if (record.pausedImage) {
      release = await ctx.reserveSlot(record);
      // The token stays the same across a cold boot, as in the reference: an SDK object's own connect()
      // keeps the token it has, so a rotated one would lock it out of its sandbox.
      // Its committed filesystem is on its node (it resumes there), or in the registry (any node with room).
      const booted = ctx.images.movable(record.pausedImage)
        ? await resumeAnywhere(ctx, record, record.pausedImage, log)
        : await ctx.boot.cold(ctx.nodes.runtime(record.nodeId), record, record.pausedImage, log, await ctx.directoriesOf(record), ctx.nodes.dialOf(record.nodeId), ctx.openProxyPassword);
      record.containerId = booted.containerId;
      record.address = booted.address;
      record.envdVersion = booted.envdVersion;
      // The image stays (tagged) under the new container until the sandbox is killed or paused again.
      if (ctx.images.movable(record.pausedImage)) pulled = record.pausedImage;
      record.pausedImage = null;
    } else {
      await thaw(ctx.envd, record, ctx.nodes.runtime(record.nodeId), ctx.nodes.dialOf(record.nodeId));
    }
    await ctx.trustEgressCa(record);
    // Paused time does not count: a fresh window starts now.
    record.state = 'running';
    record.pausedAt = null;
    record.startedAt = nowIso();
    record.timeoutSeconds = timeoutSeconds;
    record.endAt = inSeconds(timeoutSeconds);
    await ctx.registry.persist(record, 'sandbox resumed');
    // Only once the record no longer names it: a crash before leaves a sandbox that can still resume from it.
    if (pulled) await ctx.images.forget(pulled);
  } finally {
    release();
  }
  ctx.timers.arm(record);
  log.info('sandbox resumed');
  return record;
}

/** Thaws a frozen sandbox on its node and gives envd its settings again. */
async function thaw(envd: Pick<EnvdCalls, 'initEnvd'>, record: SandboxRecord, runtime: SandboxRuntime, dial: EnvdDial | undefined): Promise<void> {
  // A resume that failed half-way (thawed, /init failed) may be retried: only thaw what is frozen.
  const { status } = await runtime.inspect(record.containerId!);
  if (status === 'paused') await runtime.unpause(record.containerId!);
  else if (status !== 'running') throw new PlatformError('internal', `Sandbox "${record.sandboxId}" cannot be resumed: its container is ${status}`);
  await envd.initEnvd(record.address!, initFor(record), dial);
}

/**
 * A filesystem pause in the registry resumes on the node placement picks (its own node is preferred while it still
 * has the image, a volume pins it to its node, which holds the volume); that node pulls the image if it lacks it, a
 * failed pull or start tries another node. The image is named as the sandbox's own there (removed with it).
 */
async function resumeAnywhere(ctx: PauseResumeContext, record: SandboxRecord, image: string, log: Logger): Promise<BootedSandbox> {
  const previous = record.nodeId;
  const { result, nodeId } = await startOnPlacedNode(
    ctx.nodes,
    () => ctx.registry.all(),
    { cpuCount: record.cpuCount, memoryMB: record.memoryMB, image, requiredNode: record.volumeMounts.length > 0 ? previous : undefined },
    async (node) => {
      const nodeLog = log.child({ nodeId: node.nodeId });
      await ctx.images.ensure(node.runtime, image, nodeLog);
      const booted = await ctx.boot.cold(node.runtime, { ...record, nodeId: node.nodeId }, image, nodeLog, await ctx.directoriesOf(record), ctx.nodes.dialOf(node.nodeId), ctx.openProxyPassword);
      // Best effort: the container already runs (a retry elsewhere would leave it behind).
      await node.runtime.claimSandboxImage(image, record.sandboxId).catch((error: unknown) => nodeLog.warn({ err: error }, 'could not name the pulled image as the sandbox\'s own'));
      return booted;
    },
    log,
  );
  record.nodeId = nodeId;
  const runtime = ctx.nodes.runtime(nodeId);
  // The registry name is not needed on the node any more (the sandbox's own name holds the image).
  await runtime.removeImage(image).catch((error: unknown) => log.warn({ err: error, nodeId }, 'could not untag the pulled image'));
  if (previous !== nodeId) {
    log.info({ from: previous, to: nodeId }, 'filesystem-paused sandbox resumed on another node');
    // Not waited for: the old node may be down (its calls would wait for their deadlines).
    const old = ctx.nodes.has(previous) ? ctx.nodes.runtime(previous) : undefined;
    if (old) {
      void old
        .removeSandboxImage(record.sandboxId)
        .then(() => old.removeImage(image))
        .catch((error: unknown) => log.warn({ err: error, nodeId: previous }, 'could not remove the paused image from its old node'));
    }
  }
  return result;
}
