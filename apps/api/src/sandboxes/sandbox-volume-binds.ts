import { invalid } from '../errors.ts';
import type { DirectoryMount } from '../runtime/sandbox-runtime.ts';
import type { LifecycleContext, VolumeSource } from './lifecycle/lifecycle-context.ts';
import type { SandboxRecord } from './registry/sandbox-record.ts';
import { type SandboxVolumeMount, volumeMountsProblem } from './volume-mounts.ts';

/** Bind mounts of the sandbox's volumes, as the engine of `nodeId` (where the container is made) sees them. */
export async function directoriesOf(ctx: LifecycleContext, record: SandboxRecord, nodeId = record.nodeId): Promise<DirectoryMount[]> {
  if (record.volumeMounts.length === 0) return [];
  const volumes = requireVolumes(ctx);
  return Promise.all(record.volumeMounts.map(async (m) => ({ source: await volumes.hostDir(m.volumeID, nodeId), target: m.path })));
}

/** Checks and resolves a create request's `volumeMounts` (no container exists yet), and the node they live on. */
export async function resolveMounts(ctx: LifecycleContext, teamId: string, requested: Array<{ name: string; path: string }>): Promise<{ mounts: SandboxVolumeMount[]; nodeId?: string }> {
  if (requested.length === 0) return { mounts: [] };
  const problem = volumeMountsProblem(requested);
  if (problem) throw invalid(problem);
  const volumes = await requireVolumes(ctx).resolveNames(teamId, requested.map((m) => m.name));
  const nodes = new Set(volumes.map((v) => v.nodeId));
  if (nodes.size > 1) throw invalid(`volumes ${volumes.map((v) => `"${v.name}"`).join(', ')} live on different nodes (${[...nodes].join(', ')}); a sandbox can mount volumes of one node only`);
  return { mounts: requested.map((m, i) => ({ name: volumes[i].name, volumeID: volumes[i].volumeID, path: m.path })), nodeId: volumes[0].nodeId };
}

export function requireVolumes(ctx: LifecycleContext): VolumeSource {
  if (!ctx.deps.volumes) throw invalid('volumes are not available on this platform');
  return ctx.deps.volumes;
}
