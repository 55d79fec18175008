import { type LifecycleContext, sandboxLog } from './lifecycle-context.ts';
import { egressPolicy } from '../egress/network-rules.ts';
import { hasTransforms } from '../egress/egress-trust.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import { reconcileAfterRestart } from './restart-reconcile.ts';

/**
 * Makes one node's containers and the records naming it agree (after a restart, or when a lost node returns):
 * adopts what it still runs that records name, removes what the platform forgot, and puts egress rules in force again.
 */
export async function reconcileNode(ctx: LifecycleContext, nodeId: string, stored?: SandboxRecord[]): Promise<void> {
  const records = (stored ?? (await ctx.registry.stored())).filter((r) => r.nodeId === nodeId && !ctx.creations.isCreating(r.sandboxId));
  const runtime = ctx.deps.nodes.runtime(nodeId);
  await reconcileAfterRestart({ registry: ctx.registry, runtime, records, logger: ctx.deps.logger.child({ nodeId }), adopted: (r) => ctx.timers.arm(r), metrics: ctx.deps.platformMetrics, keep: (id) => ctx.creations.isCreating(id) || Boolean(ctx.deps.pools?.owns(id)),
    // A node's pool containers are its pool holder's (maybe another replica: any remote node, and on a shared
    // database the embedded one too): the holder removes leftovers itself when it takes the pool.
    keepPooled: nodeId !== ctx.deps.nodes.embeddedId || ctx.deps.shared !== undefined });
  await reapplyEgress(ctx, nodeId);
}

/**
 * Egress rules live in the records: they are put in force again on the node (replacing what the host kept), and a
 * node agent gets the secrets of its sandboxes' rules again (after a reconcile, or when the agent restarted).
 */
export async function reapplyEgress(ctx: LifecycleContext, nodeId: string): Promise<void> {
  const runtime = ctx.deps.nodes.runtime(nodeId);
  for (const record of ctx.registry.all()) {
    if (record.nodeId !== nodeId || !record.address || !record.containerId) continue;
    await Promise.resolve()
      .then(() => runtime.applyEgress?.(record.sandboxId, record.address!, egressPolicy(record.network, ctx.openProxyPassword)))
      // A node agent keeps the secret values of the sandbox's rules in memory: it gets them again.
      .then(() => (hasTransforms(record.network) ? ctx.deps.egressTrust?.pushSecrets(record) : undefined))
      .catch((error: unknown) => sandboxLog(ctx, record.sandboxId).error({ err: error, nodeId }, 'egress rules not re-applied'));
  }
}

/**
 * Replicas died with creates or filesystem resumes of these sandboxes in flight (their reservations expired):
 * whatever they left half-made on the nodes this API drives goes. No record: the container (the client never got
 * an answer). A record paused to its filesystem: a container the interrupted resume made. Otherwise nothing.
 */
export async function cleanAbandoned(ctx: LifecycleContext, sandboxIds: string[]): Promise<void> {
  const wanted = new Set(sandboxIds);
  for (const node of ctx.deps.nodes.all()) {
    const leftovers = (await node.runtime.listManaged()).filter((c) => wanted.has(c.sandboxId) && !ctx.creations.isCreating(c.sandboxId));
    for (const container of leftovers) {
      await ctx.registry.serial(container.sandboxId, async () => {
        const record = ctx.registry.peek(container.sandboxId);
        if (record && !(record.state === 'paused' && record.pausedImage && record.nodeId === node.nodeId)) return;
        await node.runtime.remove(container.containerId);
        ctx.deps.platformMetrics?.orphansRemoved('container');
        sandboxLog(ctx, container.sandboxId).warn({ nodeId: node.nodeId, containerId: container.containerId, resume: Boolean(record) }, 'removed a container an API replica left half-made when it stopped');
      });
    }
  }
}
