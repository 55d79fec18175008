import type { Logger } from 'pino';
import { initEnvd } from '../envd/envd-client.ts';
import { PlatformError } from '../errors.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import type { DirectoryMount, SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { EnvdDial } from '../envd/envd-client.ts';
import { bootSandbox, initFor } from './sandbox-boot.ts';
import type { SandboxRecord } from './sandbox-record.ts';
import type { SandboxRegistry } from './sandbox-registry.ts';
import type { SandboxTimers } from './sandbox-timers.ts';

/** What pausing and resuming a sandbox work with (the lifecycle holds them; the caller serialises per sandbox). */
export interface PauseResumeContext {
  registry: SandboxRegistry;
  nodes: NodeSet;
  timers: SandboxTimers;
  logger: Logger;
  /** Timeout of a sandbox resumed without one and without a usable timeout of its own. */
  defaultTimeoutSeconds: number;
  /** One slot under the sandbox limit (a filesystem resume makes a container), held until its record says so. */
  reserveSlot(sandboxId: string): Promise<() => void>;
  /** Bind mounts of the sandbox's volumes. */
  directoriesOf(record: SandboxRecord): Promise<DirectoryMount[]>;
  /** Opens a sealed `network.egressProxy` password for the node's dialer (egressPolicy). */
  openProxyPassword(sealed: string): string;
  /** A sandbox with network.rules trusts its egress CA again once it runs (idempotent). */
  trustEgressCa(record: SandboxRecord): Promise<void>;
}

const nowIso = (): string => new Date().toISOString();
const inSeconds = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString();

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
    await ctx.registry.persist(record, 'sandbox paused (filesystem only)');
  }
  ctx.logger.child({ sandboxId: record.sandboxId, nodeId: record.nodeId }).info({ keepMemory }, 'sandbox paused');
}

/** Thaws a frozen sandbox, or cold-boots one paused to its filesystem, on its own node; a fresh timeout window starts. */
export async function resumeSandbox(ctx: PauseResumeContext, record: SandboxRecord, requestedTimeout: number | undefined): Promise<SandboxRecord> {
  const log = ctx.logger.child({ sandboxId: record.sandboxId, nodeId: record.nodeId });
  const own = record.timeoutSeconds > 0 ? record.timeoutSeconds : ctx.defaultTimeoutSeconds;
  const timeoutSeconds = requestedTimeout !== undefined && requestedTimeout > 0 ? requestedTimeout : own;
  const runtime = ctx.nodes.runtime(record.nodeId);
  const dial = ctx.nodes.dialOf(record.nodeId);
  // A filesystem resume's slot is released once the record holds the container (or the resume failed): never uncounted.
  let release = (): void => undefined;
  try {
    if (record.pausedImage) {
      release = await ctx.reserveSlot(record.sandboxId);
      // The token stays the same across a cold boot, as in the reference: an SDK object's own connect()
      // keeps the token it has, so a rotated one would lock it out of its sandbox.
      // Its committed filesystem is on its node: it resumes there.
      const booted = await bootSandbox(runtime, record, record.pausedImage, log, await ctx.directoriesOf(record), dial, ctx.openProxyPassword);
      record.containerId = booted.containerId;
      record.address = booted.address;
      record.envdVersion = booted.envdVersion;
      // The image stays (tagged) under the new container until the sandbox is killed or paused again.
      record.pausedImage = null;
    } else {
      await thaw(record, runtime, dial);
    }
    await ctx.trustEgressCa(record);
    // Paused time does not count: a fresh window starts now.
    record.state = 'running';
    record.pausedAt = null;
    record.startedAt = nowIso();
    record.timeoutSeconds = timeoutSeconds;
    record.endAt = inSeconds(timeoutSeconds);
    await ctx.registry.persist(record, 'sandbox resumed');
  } finally {
    release();
  }
  ctx.timers.arm(record);
  log.info('sandbox resumed');
  return record;
}

/** Thaws a frozen sandbox on its node and gives envd its settings again. */
async function thaw(record: SandboxRecord, runtime: SandboxRuntime, dial: EnvdDial | undefined): Promise<void> {
  // A resume that failed half-way (thawed, /init failed) may be retried: only thaw what is frozen.
  const { status } = await runtime.inspect(record.containerId!);
  if (status === 'paused') await runtime.unpause(record.containerId!);
  else if (status !== 'running') throw new PlatformError('internal', `Sandbox "${record.sandboxId}" cannot be resumed: its container is ${status}`);
  await initEnvd(record.address!, initFor(record), dial);
}
