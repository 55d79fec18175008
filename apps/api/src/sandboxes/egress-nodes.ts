/**
 * Which nodes can apply a sandbox's egress extras: header transforms (`network.rules`) need the egress proxy and a
 * per-sandbox CA; `network.egressProxy` needs the egress tunnel. Both run in the process that owns the engine, so
 * today only an API's embedded node on a Docker host with its isolation rules has them; a node agent has neither
 * yet. Placement leaves the other nodes out, and a create no node can take is refused with the reason.
 */
import { PlatformError } from '../errors.ts';
import type { SandboxNode } from '../nodes/sandbox-node.ts';
import { hasTransforms } from './egress-trust.ts';
import type { SandboxNetwork } from './sandbox-record.ts';

const TRANSFORMS_NEED =
  'header transforms need the egress proxy, which runs only in an API process that embeds its node on the Docker host with its isolation rules installed (not on a node agent yet)';

/** 400 for network.rules on `nodeId` (or, without one, on this install). */
export function transformsUnavailable(nodeId?: string): PlatformError {
  return new PlatformError('invalid', nodeId === undefined ? `network.rules cannot be applied here: ${TRANSFORMS_NEED}` : `network.rules cannot be applied on node "${nodeId}": ${TRANSFORMS_NEED}`);
}

/** Why `node` cannot apply `network`'s extras, or undefined when it can (or there is nothing to apply). */
export async function egressProblemOn(node: SandboxNode, network: SandboxNetwork, transformsConfigured: boolean): Promise<PlatformError | undefined> {
  const { runtime } = node;
  if (hasTransforms(network)) {
    const available = transformsConfigured && (await Promise.resolve(runtime.egressTransformsAvailable?.()).catch(() => false)) === true;
    if (!available) return transformsUnavailable(node.nodeId);
  }
  if (network.egressProxy) {
    const problem = runtime.egressUpstreamProblem
      ? await runtime.egressUpstreamProblem().catch((error: unknown) => `its node did not answer (${(error as Error).message})`)
      : 'its runtime cannot tunnel sandbox egress (a node agent does not run the egress tunnel yet)';
    if (problem !== undefined) return new PlatformError('invalid', `network.egressProxy cannot be applied on node "${node.nodeId}": ${problem}`);
  }
  return undefined;
}

/**
 * The nodes placement must leave out for a sandbox with `network`; throws the first node's reason when that
 * is every node (a create nothing can start is refused before anything is made).
 */
export async function nodesWithoutEgress(nodes: readonly SandboxNode[], network: SandboxNetwork, transformsConfigured: boolean): Promise<Set<string>> {
  const excluded = new Set<string>();
  if (!hasTransforms(network) && !network.egressProxy) return excluded;
  let first: PlatformError | undefined;
  for (const node of nodes) {
    const problem = await egressProblemOn(node, network, transformsConfigured);
    if (!problem) continue;
    excluded.add(node.nodeId);
    first ??= problem;
  }
  if (first && excluded.size === nodes.length) throw first.message.startsWith('network.rules') ? transformsUnavailable() : first;
  return excluded;
}
