import { type LifecycleContext, sandboxLog } from './lifecycle-context.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

/**
 * The engine says the sandbox's container died or vanished behind our back: the sandbox ends as if
 * killed, with `reason` in its log. Ignored when the container is no longer the sandbox's (paused to
 * the filesystem, killed, re-booted). Resolves true when the sandbox was removed.
 */
export function containerLost(ctx: LifecycleContext, id: string, containerId: string, reason: string): Promise<boolean> {
  return ctx.registry.serial(id, async () => {
    const record = ctx.registry.get(id);
    if (!record || record.containerId !== containerId) return false;
    const { status } = await ctx.deps.nodes.runtime(record.nodeId).inspect(containerId);
    if (status === 'running' || status === 'paused') return false;
    await ctx.registry.recordEvent(id, reason, 'error');
    sandboxLog(ctx, id).warn({ containerId, reason, state: record.state }, 'sandbox container is gone; removing the sandbox');
    await destroySandbox(ctx, record);
    return true;
  });
}

/** Removes the sandbox's container and images (its node's; the registry's once no record names them) and forgets it. */
export async function destroySandbox(ctx: LifecycleContext, record: SandboxRecord): Promise<void> {
  ctx.timers.clear(record.sandboxId);
  const inRegistry = !record.containerId && ctx.images.movable(record.pausedImage) ? record.pausedImage! : undefined;
  if (inRegistry) {
    // Its filesystem is in the registry: the node that paused it may be gone (or not driven here), so its copies there are best effort.
    const log = sandboxLog(ctx, record.sandboxId);
    const runtime = ctx.deps.nodes.has(record.nodeId) ? ctx.deps.nodes.runtime(record.nodeId) : undefined;
    await runtime?.removeSandboxImage(record.sandboxId).catch((error: unknown) => log.warn({ err: error, nodeId: record.nodeId }, 'could not remove the paused image from its node'));
    await runtime?.removeImage(inRegistry).catch((error: unknown) => log.warn({ err: error, nodeId: record.nodeId }, 'could not untag the paused image on its node'));
  } else {
    const runtime = ctx.deps.nodes.runtime(record.nodeId);
    if (record.containerId) await runtime.remove(record.containerId);
    await runtime.removeSandboxImage(record.sandboxId);
  }
  await ctx.registry.forget(record.sandboxId);
  // Once no record names it (best effort, logged).
  await ctx.images.forget(inRegistry);
  ctx.deps.egressTrust?.forget(record);
  ctx.metrics.forget(record.sandboxId);
  ctx.timers.forget(record.sandboxId);
}
