import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { PlatformError } from '../../errors.ts';
import { type MetricsSink, noMetrics, timed } from '../../observability/metrics-sink.ts';
import type { SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import type { SnapshotInfo, TemplateCatalog } from '../../templates/template-catalog.ts';
import type { SandboxLifecycle } from './sandbox-lifecycle.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';
import type { ClusterImages } from '../../nodes/cluster-images.ts';
import { SNAPSHOT_REPOSITORY } from '../../runtime/platform-repositories.ts';

export interface SnapshotDeps {
  lifecycle: SandboxLifecycle;
  /** The cluster registry (a snapshot is pushed there). */
  images: ClusterImages;
  /** The sandbox's event log. */
  events: Pick<SandboxRegistry, 'recordEvent'>;
  catalog: TemplateCatalog;
  logger: Logger;
  /** Prometheus: snapshot durations (none: not reported). */
  platformMetrics?: MetricsSink;
}

/**
 * The sandbox's filesystem as an image: a commit of its container (frozen only while the commit is
 * written, so the filesystem is consistent), or its own committed image when it is paused to disk.
 */
export async function captureFilesystem(runtime: SandboxRuntime, record: SandboxRecord, image: string): Promise<void> {
  if (record.containerId) await runtime.commit(record.containerId, image);
  else if (record.pausedImage) await runtime.tagImage(record.pausedImage, image);
  else throw new Error(`sandbox ${record.sandboxId} has neither a container nor a paused image`);
}

/**
 * `POST /sandboxes/{id}/snapshots`: the sandbox's filesystem becomes a template (or a new build of the
 * named one) that starts with the sandbox's envs, user, workdir and start command. The sandbox keeps running.
 */
export function createSnapshot(deps: SnapshotDeps, sandboxId: string, name: string | undefined): Promise<SnapshotInfo> {
  const sink = deps.platformMetrics ?? noMetrics;
  return timed((outcome, seconds) => sink.sandboxOperation('snapshot', outcome, seconds), () => snapshotNow(deps, sandboxId, name));
}

function snapshotNow(deps: SnapshotDeps, sandboxId: string, name: string | undefined): Promise<SnapshotInfo> {
  return deps.lifecycle.withSandbox(sandboxId, async (record) => {
    const started = Date.now();
    const tag = randomBytes(10).toString('hex');
    const local = `${SNAPSHOT_REPOSITORY}:${tag}`;
    // The image is made on the sandbox's node; with a registry it is pushed (and recorded) under its registry name.
    const runtime = deps.lifecycle.nodes.runtime(record.nodeId);
    await captureFilesystem(runtime, record, local);
    let image = local;
    try {
      image = await deps.images.publish(runtime, local, 'snapshot', tag, true);
    } catch (error) {
      // Nothing half-made: no snapshot row, no image on the node.
      await runtime.removeImage(local).catch((cleanup: unknown) => deps.logger.warn({ err: cleanup, sandboxId: record.sandboxId, image: local }, 'could not remove the image of a snapshot whose push failed'));
      throw new PlatformError('internal', `Snapshot of sandbox "${record.sandboxId}" failed: its image could not be pushed to the registry (${error instanceof Error ? error.message : String(error)})`);
    }
    try {
      const info = await deps.catalog.registerSnapshot({
        teamId: record.teamId,
        sourceSandboxId: record.sandboxId,
        name,
        image,
        envdVersion: record.envdVersion,
        defaults: { ...record.defaults, envs: { ...record.defaults.envs, ...record.envVars } },
        cpuCount: record.cpuCount,
        memoryMB: record.memoryMB,
        diskSizeMB: record.diskSizeMB,
      });
      await deps.events.recordEvent(record.sandboxId, `snapshot ${info.snapshotID} taken`);
      deps.logger.info({ sandboxId: record.sandboxId, snapshotId: info.snapshotID, image, ms: Date.now() - started }, 'snapshot taken');
      return info;
    } catch (error) {
      await runtime.removeImage(image);
      await deps.images.forget(image);
      throw error;
    }
  });
}
