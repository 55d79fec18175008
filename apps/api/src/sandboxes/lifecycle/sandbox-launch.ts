import type { Logger } from 'pino';
import { PlatformError } from '../../errors.ts';
import { TeamQuotaError } from '../../teams/team-quotas.ts';
import { startOnPlacedNode } from '../../nodes/placed-start.ts';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';
import { type LifecycleContext, sandboxLog } from './lifecycle-context.ts';
import { inSeconds, nowIso } from './wall-clock.ts';
import { poolKey } from '../pool/pool-settings.ts';
import { envdAccessToken, newSandboxId, trafficAccessToken } from '../sandbox-identity.ts';
import { requireEgressOn, trustEgressCa } from '../egress/sandbox-network-update.ts';
import type { SandboxNetwork, SandboxRecord } from '../registry/sandbox-record.ts';
import type { SlotRelease } from '../registry/sandbox-slots.ts';
import { directoriesOf, requireVolumes } from '../sandbox-volume-binds.ts';
import type { SandboxVolumeMount } from '../volume-mounts.ts';
import type { PooledContainer } from '../pool/warm-pool.ts';

/** How a sandbox is configured, whatever it starts from (a template, a fork checkpoint). */
export interface SandboxSettings {
  /** The owning team (the creating key's; a fork's source's). */
  teamId: string;
  timeoutSeconds: number;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  network: SandboxNetwork;
  allowInternetAccess: boolean | null;
  volumeMounts: SandboxVolumeMount[];
}

/** Everything `launch` needs: what to run and how the sandbox is configured. */
export interface LaunchPlan {
  sandboxId?: string;
  /** The node it must start on (its volumes' node; a fork without a registry: its source's); placed otherwise. */
  nodeId?: string;
  /** Placement takes this node when it has room (a fork's source: its checkpoint is there). */
  preferredNode?: string;
  image: string;
  /**
   * The image the sandbox starts from on the node placement picked, made present there (a fork: its checkpoint,
   * brought from its source's node); without it `image`, pulled when the node lacks it.
   */
  imageOn?: (node: SandboxNode) => Promise<string>;
  from: Pick<SandboxRecord, 'templateId' | 'buildId' | 'alias' | 'cpuCount' | 'memoryMB' | 'diskSizeMB' | 'envdVersion' | 'defaults'>;
  settings: SandboxSettings;
  event: string;
  /** A warm-pool container to claim instead of starting one (its sandbox id is `sandboxId`). */
  pooled?: PooledContainer;
  /** Nodes placement must leave out (they cannot apply the sandbox's network.rules or egressProxy). */
  excluded?: ReadonlySet<string>;
}

/** The record of a sandbox about to start (no container yet): identity, tokens, settings, its first timeout window. */
export function newSandboxRecord(plan: LaunchPlan, sandboxId: string, tokenSeed: string, nodeId: string): SandboxRecord {
  const { settings, from } = plan;
  const now = Date.now();
  return {
    sandboxId,
    teamId: settings.teamId,
    templateId: from.templateId,
    buildId: from.buildId,
    alias: from.alias,
    cpuCount: from.cpuCount,
    memoryMB: from.memoryMB,
    diskSizeMB: from.diskSizeMB,
    envdVersion: from.envdVersion,
    defaults: from.defaults,
    state: 'running',
    containerId: null,
    address: null,
    pausedImage: null,
    startedAt: new Date(now).toISOString(),
    endAt: new Date(now + settings.timeoutSeconds * 1000).toISOString(),
    timeoutSeconds: settings.timeoutSeconds,
    pausedAt: null,
    envdAccessToken: envdAccessToken(tokenSeed, sandboxId),
    trafficAccessToken: settings.network.allowPublicTraffic === false ? trafficAccessToken(tokenSeed, sandboxId) : null,
    metadata: settings.metadata,
    envVars: settings.envVars,
    network: settings.network,
    allowInternetAccess: settings.allowInternetAccess,
    autoPause: settings.autoPause,
    autoPauseMemory: settings.autoPauseMemory,
    autoResume: settings.autoResume,
    volumeMounts: settings.volumeMounts,
    nodeId,
  };
}

/**
 * One slot under the sandbox limit and the team's quota; when the platform has none free, a ready warm-pool container
 * gives its slot up (never for a team at its own quota: that would empty the pool for the others).
 */
export async function reserveSlot(ctx: LifecycleContext, sandboxId: string, teamId: string, kind: 'create' | 'resume'): Promise<SlotRelease> {
  try {
    return await ctx.slots.reserveFor(sandboxId, teamId, kind);
  } catch (error) {
    if (!(error instanceof PlatformError) || error.kind !== 'limit' || error instanceof TeamQuotaError || !ctx.deps.pools?.evictOne()) throw error;
    return ctx.slots.reserveFor(sandboxId, teamId, kind);
  }
}

/**
 * Starts a new sandbox from an image (a template build, a fork checkpoint); takes one slot (`poolSlot`: the warm-pool
 * container's, which a shared database still records as this replica's create).
 */
export function launchSandbox(ctx: LifecycleContext, plan: LaunchPlan, poolSlot?: SlotRelease): Promise<SandboxRecord> {
  const sandboxId = plan.sandboxId ?? newSandboxId();
  // In flight from the call on (its slot may be taken in the store first): drain and reconcile wait for it.
  return ctx.creations.track(sandboxId, launchWithSlot(ctx, { ...plan, sandboxId }, poolSlot));
}

async function launchWithSlot(ctx: LifecycleContext, plan: LaunchPlan & { sandboxId: string }, poolSlot: SlotRelease | undefined): Promise<SandboxRecord> {
  const { sandboxId } = plan;
  let release: SlotRelease;
  if (poolSlot) {
    try {
      const recorded = await ctx.slots.reserveFor(sandboxId, plan.settings.teamId, 'create', false);
      release = (howMany) => {
        poolSlot(howMany);
        recorded();
      };
    } catch (error) {
      // A team over its quota leaves the slot with its holder: the pool takes its untouched container back
      // (sandbox-create.ts), a fork's call gives back what its forks did not use.
      if (!(error instanceof TeamQuotaError)) poolSlot();
      throw error;
    }
  } else {
    release = await reserveSlot(ctx, sandboxId, plan.settings.teamId, 'create');
  }
  let held: { release(): void } | undefined;
  try {
    // Held from before the container exists until the record does, so a delete cannot race the creation.
    if (plan.settings.volumeMounts.length > 0) held = await requireVolumes(ctx).hold(plan.settings.volumeMounts.map((m) => m.volumeID));
  } catch (error) {
    release(1);
    throw error;
  }
  try {
    return await launchNow(ctx, plan, release);
  } finally {
    held?.release();
  }
}

async function launchNow(ctx: LifecycleContext, plan: LaunchPlan, release: (howMany?: number) => void): Promise<SandboxRecord> {
  try {
    const sandboxId = plan.sandboxId ?? newSandboxId();
    const { settings, from } = plan;
    const record = newSandboxRecord(plan, sandboxId, ctx.deps.tokenSeed, plan.nodeId ?? ctx.deps.nodes.embeddedId ?? '');
    const log = sandboxLog(ctx, sandboxId);
    const { result: booted, nodeId } = plan.pooled && plan.nodeId
      ? { result: await claimOn(ctx, plan.nodeId, record, plan.pooled, log), nodeId: plan.nodeId }
      : await startOnPlacedNode(
          ctx.deps.nodes,
          () => ctx.registry.all(),
          {
            cpuCount: record.cpuCount,
            memoryMB: record.memoryMB,
            image: plan.image,
            poolKey: poolKey(from),
            // Volumes on the node whose disk holds them (a fork without a registry: its source's, where its checkpoint is).
            requiredNode: plan.nodeId,
            preferredNode: plan.preferredNode,
            exclude: plan.excluded,
          },
          async (node) => {
            await requireEgressOn(ctx, node.nodeId, settings.network);
            // A node that lacks the image pulls it from the registry (a fork's checkpoint: imageOn brings it); a failed pull fails this node only.
            const image = plan.imageOn ? await plan.imageOn(node) : plan.image;
            if (!plan.imageOn) await ctx.images.ensure(node.runtime, plan.image, log.child({ nodeId: node.nodeId }));
            return ctx.deps.boot.cold(node.runtime, { ...record, nodeId: node.nodeId }, image, log.child({ nodeId: node.nodeId }), await directoriesOf(ctx, record, node.nodeId), ctx.deps.nodes.dialOf(node.nodeId), ctx.openProxyPassword);
          },
          log,
        );
    record.nodeId = nodeId;
    record.containerId = booted.containerId;
    record.address = booted.address;
    record.envdVersion = booted.envdVersion;
    try {
      await trustEgressCa(ctx, record);
    } catch (error) {
      await ctx.deps.nodes.runtime(record.nodeId).remove(booted.containerId);
      ctx.deps.egressTrust?.forget(record);
      throw error;
    }
    // The timeout counts from the moment the sandbox is usable.
    record.startedAt = nowIso();
    record.endAt = inSeconds(settings.timeoutSeconds);
    try {
      await ctx.registry.persist(record, plan.event, true);
    } catch (error) {
      await ctx.deps.nodes.runtime(record.nodeId).remove(booted.containerId);
      throw error;
    }
    ctx.timers.arm(record);
    log.info({ templateId: record.templateId, buildId: record.buildId, containerId: record.containerId, nodeId: record.nodeId, warmPool: Boolean(plan.pooled) }, plan.pooled ? 'sandbox created (claimed from the warm pool)' : 'sandbox created');
    return record;
  } finally {
    release(1);
  }
}

/** A warm-pool container on `nodeId` becomes the record's sandbox. */
async function claimOn(ctx: LifecycleContext, nodeId: string, record: SandboxRecord, pooled: PooledContainer, log: Logger) {
  const runtime = ctx.deps.nodes.runtime(nodeId);
  await requireEgressOn(ctx, nodeId, record.network);
  return ctx.deps.boot.claim(runtime, record, pooled, log, ctx.openProxyPassword, ctx.deps.nodes.dialOf(nodeId));
}
