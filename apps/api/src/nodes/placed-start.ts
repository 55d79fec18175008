import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { NodeSet, PlacedSandbox } from './node-set.ts';
import type { PlacementRequest } from './placement.ts';
import type { SandboxNode } from './sandbox-node.ts';

/** Nodes a create may try before it gives up (the first failure's error is kept for the answer). */
export const MAX_START_ATTEMPTS = 3;

/**
 * Places a create and starts it there; a start that fails is tried on another node (bounded), each placement
 * counting as in flight on its node until its start settles. 429 (`limit`) only when every node is full; when no
 * node can take it at all, the first start's error, or 503 when nothing was tried.
 */
export async function startOnPlacedNode<T>(
  nodes: NodeSet,
  sandboxes: () => Iterable<PlacedSandbox>,
  request: PlacementRequest,
  start: (node: SandboxNode) => Promise<T>,
  logger: Logger,
): Promise<{ result: T; nodeId: string }> {
  const tried = new Set<string>(request.exclude ?? []);
  let firstError: unknown;
  for (let attempt = 1; attempt <= MAX_START_ATTEMPTS; attempt++) {
    const placement = nodes.place({ ...request, exclude: tried }, sandboxes());
    if (placement.kind !== 'placed') {
      if (firstError !== undefined) throw firstError;
      if (placement.kind === 'full') throw new PlatformError('limit', placement.message, { retryAfterSeconds: 1 });
      throw new PlatformError('busy', placement.message, { retryAfterSeconds: 5 });
    }
    const release = nodes.reserve(placement.nodeId, request.cpuCount, request.memoryMB);
    try {
      const result = await start(nodes.node(placement.nodeId));
      nodes.recordStart(placement.nodeId, true);
      return { result, nodeId: placement.nodeId };
    } catch (error) {
      nodes.recordStart(placement.nodeId, false);
      // A refusal of the request itself (bad input, a limit) is the same on every node.
      if (error instanceof PlatformError && error.kind !== 'internal') throw error;
      firstError ??= error;
      tried.add(placement.nodeId);
      logger.warn({ err: error, nodeId: placement.nodeId, attempt }, 'sandbox start failed on a node; trying another');
    } finally {
      release();
    }
  }
  throw firstError;
}
