/** What this node has (cpus, memory, images), as its heartbeats and `GET /v1/capacity` report it. */
import type Docker from 'dockerode';
import type { NodeCapacity } from '../nodes/sandbox-node.ts';
import { readMemAvailableMB } from '../runtime/host-memory.ts';

/** Images reported at most (placement only needs the platform's own template and snapshot images); the node store takes no more. */
const MAX_IMAGES = 1_000;

export async function readNodeCapacity(docker: Docker, memoryAvailableMB: () => number | undefined = readMemAvailableMB): Promise<NodeCapacity> {
  const [info, images] = await Promise.all([docker.info() as Promise<{ NCPU?: number; MemTotal?: number }>, docker.listImages()]);
  const memoryMB = Math.floor(Number(info.MemTotal ?? 0) / (1024 * 1024));
  const tags = images.flatMap((image) => image.RepoTags ?? []).filter((tag) => tag !== '<none>:<none>');
  return {
    cpuCount: Number(info.NCPU ?? 0),
    memoryMB,
    memoryAvailableMB: Math.min(memoryAvailableMB() ?? memoryMB, memoryMB),
    images: tags.slice(0, MAX_IMAGES),
  };
}
