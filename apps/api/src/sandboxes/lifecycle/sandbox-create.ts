import { TeamQuotaError } from '../../teams/team-quotas.ts';
import type { EgressProxyRequest } from '../egress/egress-proxy-settings.ts';
import { hasTransforms } from '../egress/egress-trust.ts';
import { type LifecycleContext, sandboxLog } from './lifecycle-context.ts';
import { poolKey } from '../pool/pool-settings.ts';
import { type LaunchPlan, launchSandbox, type SandboxSettings } from './sandbox-launch.ts';
import { admitEgressProxy, egressExcluded, requireEgressOn } from '../egress/sandbox-network-update.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import { resolveMounts } from '../sandbox-volume-binds.ts';

export interface CreateSandboxInput extends Omit<SandboxSettings, 'volumeMounts'> {
  templateRef: string;
  /** `network.egressProxy` as validated by the route; admitted (resolved, password sealed) before anything is made. */
  egressProxy?: EgressProxyRequest;
  /** As requested: volumes by name. */
  volumeMounts: Array<{ name: string; path: string }>;
}

/** `POST /sandboxes`: resolves the template, egress settings and volumes, then launches (from the warm pool when it can). */
export async function createSandbox(ctx: LifecycleContext, input: CreateSandboxInput): Promise<SandboxRecord> {
  // Refused before anything is made when no node could apply them; the placed node is asked again before it starts one.
  if (hasTransforms(input.network)) await egressExcluded(ctx, input.network);
  const { egressProxy, ...settings } = input;
  const network = egressProxy ? { ...input.network, egressProxy: await admitEgressProxy(ctx, egressProxy) } : input.network;
  // Placement leaves out the nodes that cannot apply network.rules or egressProxy (node agents, today).
  const excluded = await egressExcluded(ctx, network);
  const { template, build } = await ctx.deps.templates.resolve(input.templateRef, input.teamId);
  const { mounts: volumeMounts, nodeId: volumesNode } = await resolveMounts(ctx, input.teamId, input.volumeMounts);
  if (volumesNode !== undefined && excluded.has(volumesNode)) await requireEgressOn(ctx, volumesNode, network);
  const record = await launchPooledOrCold(ctx, input.templateRef, {
    // Volumes live on one node's disk: the sandbox goes there.
    nodeId: volumesNode,
    excluded,
    image: build.image!,
    from: {
      templateId: template.templateId,
      buildId: build.buildId,
      alias: template.alias,
      cpuCount: build.cpuCount,
      memoryMB: build.memoryMB,
      diskSizeMB: build.diskSizeMB,
      envdVersion: build.envdVersion ?? '0.0.0',
      defaults: build.defaults,
    },
    settings: { ...settings, network, volumeMounts },
    event: `sandbox created from template ${template.templateId} (build ${build.buildId})`,
  });
  await ctx.deps.templates.recordSpawn(template.templateId);
  return record;
}

/**
 * A ready container of the same build, cpu and memory is claimed when the pool has one; otherwise, or
 * when the claim fails (the container is removed), the sandbox starts cold. Volume binds are fixed when a
 * container is created, so a create with volumes always starts cold (and is no demand for the pool).
 * `reference` is the template as the create named it: an adaptive pool keeps that reference's build warm.
 */
async function launchPooledOrCold(ctx: LifecycleContext, reference: string, plan: LaunchPlan): Promise<SandboxRecord> {
  const pools = ctx.deps.pools;
  if (!pools || plan.settings.volumeMounts.length > 0) return launchSandbox(ctx, plan);
  // Pooled containers of a template with a start command already run it with the template's environment;
  // a create with env vars of its own needs it started with those, so it starts cold.
  const { startCmd, readyCmd } = plan.from.defaults;
  if ((startCmd || readyCmd) && Object.keys(plan.settings.envVars).length > 0) return launchSandbox(ctx, plan);
  const began = performance.now();
  const key = poolKey(plan.from);
  const { templateId, cpuCount, memoryMB, defaults } = plan.from;
  // The node placement picks (a ready pool container of the key weighs in its favour) serves the claim.
  const placement = ctx.deps.nodes.place({ cpuCount, memoryMB, image: plan.image, poolKey: key, exclude: plan.excluded }, ctx.registry.all());
  // A pooled container's memory is already taken: with no node to place on, the embedded node's pool still serves
  // (unless that node is drained, or cannot apply the sandbox's network rules).
  const embedded = ctx.deps.nodes.embeddedId;
  const embeddedServes = embedded !== undefined && ctx.deps.nodes.status(embedded) === 'ready' && !plan.excluded?.has(embedded);
  const nodeId = placement.kind === 'placed' ? placement.nodeId : embeddedServes ? embedded : undefined;
  const pool = nodeId === undefined ? undefined : pools.of(nodeId);
  const pooled = pool?.take(key, { key, reference, templateId, image: plan.image, cpuCount, memoryMB, defaults }, plan.settings.teamId);
  if (!pool || !pooled) return launchSandbox(ctx, plan);
  try {
    const record = await launchSandbox(ctx, { ...plan, sandboxId: pooled.sandboxId, pooled, nodeId }, pooled.release);
    pool.claimed(pooled, (performance.now() - began) / 1000);
    return record;
  } catch (error) {
    if (error instanceof TeamQuotaError) {
      // Refused before the container was touched: it stays ready for the next create.
      pool.putBack(pooled, plan.settings.teamId);
      throw error;
    }
    pool.claimFailed(pooled);
    sandboxLog(ctx, pooled.sandboxId).warn({ err: error, containerId: pooled.containerId }, 'warm-pool claim failed; starting a cold sandbox instead');
    return launchSandbox(ctx, plan);
  }
}
