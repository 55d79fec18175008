import type { NodeCapacity } from './sandbox-node.ts';
import type { NodeStatus } from './node-store.ts';

/**
 * Where a new sandbox goes: a pure decision over what the API knows of each node (no I/O, so it is unit-tested with
 * fake nodes and benchmarked). Free CPU and memory are the node's capacity minus the sizes of the sandboxes that hold
 * a container there minus the creates already placed there and still in flight; CPU may be overcommitted (it only
 * scores), memory may not beyond what the node measures as available (that is what makes a node full): a new
 * sandbox's whole memory limit must fit in it, beside what the creates in flight take while they start.
 */

export interface NodeLoad {
  nodeId: string;
  status: NodeStatus;
  capacity: NodeCapacity;
  /** CPUs and MiB of the sandboxes holding a container on the node (running, or paused with memory). */
  allocatedCpu: number;
  allocatedMemoryMB: number;
  /** CPUs and MiB of creates placed on the node and not finished yet. */
  inFlightCpu: number;
  inFlightMemoryMB: number;
  /** How many creates those are (when known: the memory check then counts each at what a starting sandbox takes). */
  inFlightCount?: number;
}

export interface PlacementRequest {
  cpuCount: number;
  memoryMB: number;
  /** The image the sandbox starts from (a node that has it starts sooner). */
  image?: string;
  /** Warm-pool key of the template: a node with a ready container there starts it at once. */
  poolKey?: string;
  /** Must go to this node (it holds a volume the sandbox mounts; a fork without a registry: its checkpoint). */
  requiredNode?: string;
  /** Nodes already tried for this create (a start failed there). */
  exclude?: ReadonlySet<string>;
  /**
   * Taken whenever it is a candidate with room, whatever the others' scores (a fork's source node: its checkpoint is
   * there, nothing to push or pull); when it cannot take the sandbox, placement goes on as without it.
   */
  preferredNode?: string;
}

export type Placement =
  | { kind: 'placed'; nodeId: string }
  /** Every candidate node is full: 429, retry later. */
  | { kind: 'full'; message: string }
  /** No node may take it at all (none ready, or the required one is lost/draining/unknown). */
  | { kind: 'unavailable'; message: string };

const POOL_BONUS = 2;
const IMAGE_BONUS = 1;

/**
 * What a sandbox being started takes before the node's MemAvailable shows it (MiB): an idle sandbox takes ~24 MB, so
 * counting each create in flight at its whole memory limit (1 GiB for `base`) made a node with 7 GiB available
 * "full" while six creates were in flight.
 */
const STARTING_SANDBOX_MB = 64;

/**
 * True when the node can hold `request` now: its measured available memory, less what creates in flight will take
 * before it shows them, still has room for the request's whole memory limit.
 */
function fits(node: NodeLoad, request: PlacementRequest): boolean {
  const starting = node.inFlightCount === undefined ? node.inFlightMemoryMB : Math.min(node.inFlightMemoryMB, node.inFlightCount * STARTING_SANDBOX_MB);
  return node.capacity.memoryAvailableMB - starting >= request.memoryMB;
}

/** Higher is better: the share of CPU and memory left after this sandbox, plus bonuses for a ready pool container and a present image. */
export function placementScore(node: NodeLoad, request: PlacementRequest): number {
  const { cpuCount, memoryMB } = node.capacity;
  const freeCpu = cpuCount > 0 ? (cpuCount - node.allocatedCpu - node.inFlightCpu - request.cpuCount) / cpuCount : -1;
  const freeMemory = memoryMB > 0 ? (memoryMB - node.allocatedMemoryMB - node.inFlightMemoryMB - request.memoryMB) / memoryMB : -1;
  let score = freeCpu + freeMemory;
  if (request.poolKey && (node.capacity.poolReady?.[request.poolKey] ?? 0) > 0) score += POOL_BONUS;
  if (request.image && node.capacity.images?.includes(request.image)) score += IMAGE_BONUS;
  return score;
}

export function place(nodes: Iterable<NodeLoad>, request: PlacementRequest): Placement {
  let best: NodeLoad | undefined;
  let bestScore = -Infinity;
  let preferred: NodeLoad | undefined;
  let candidates = 0;
  let full = 0;
  for (const node of nodes) {
    if (node.status !== 'ready') continue;
    if (request.requiredNode !== undefined && node.nodeId !== request.requiredNode) continue;
    if (request.exclude?.has(node.nodeId)) continue;
    candidates += 1;
    if (!fits(node, request)) {
      full += 1;
      continue;
    }
    if (node.nodeId === request.preferredNode) preferred = node;
    const score = placementScore(node, request);
    // Ties go to the smaller id, so the same facts always give the same node.
    if (score > bestScore || (score === bestScore && best !== undefined && node.nodeId < best.nodeId)) {
      best = node;
      bestScore = score;
    }
  }
  const chosen = preferred ?? best;
  if (chosen) return { kind: 'placed', nodeId: chosen.nodeId };
  if (candidates > 0 && full === candidates) {
    return { kind: 'full', message: `every node is full (${full} without ${request.memoryMB} MiB of memory available); try again later` };
  }
  if (request.requiredNode !== undefined) {
    return { kind: 'unavailable', message: `the sandbox must run on node "${request.requiredNode}" (it holds a volume the sandbox mounts, or the checkpoint it is forked from), which is not ready` };
  }
  return { kind: 'unavailable', message: request.exclude?.size ? `no other ready node to try after ${request.exclude.size} failed start(s)` : 'no node is ready to run sandboxes' };
}
