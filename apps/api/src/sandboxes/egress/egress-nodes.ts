/**
 * Which nodes can apply a sandbox's egress extras: header transforms (`network.rules`) need the egress proxy and a
 * per-sandbox CA; `network.egressProxy` needs the egress tunnel. Both run in the process that owns a node's engine
 * (an API's embedded node, or a node agent from version 2 on) on the Docker host with its isolation rules. Placement
 * leaves the other nodes out (an older agent, a host without its firewall), and a create no node can take is refused
 * with the reason.
 */
import { PlatformError } from '../../errors.ts';
import { NodeChannelError } from '../../nodes/node-channel-errors.ts';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';
import { hasTransforms } from './egress-trust.ts';
import type { SandboxNetwork } from '../registry/sandbox-record.ts';

const TRANSFORMS_NEED =
  'header transforms need the egress proxy, which runs where a node\'s engine is driven on the Docker host with its isolation rules installed (an API embedding its node, or a node agent of version 2 or later)';
const TOO_OLD_END = 'agents apply network.rules and egressProxy from version 2 on)';
const TOO_OLD = `its node agent is too old to apply it (update it: ${TOO_OLD_END}`;

/** 400 for network.rules on `nodeId` (or, without one, on this install). */
export function transformsUnavailable(nodeId?: string): PlatformError {
  return new PlatformError('invalid', nodeId === undefined ? `network.rules cannot be applied here: ${TRANSFORMS_NEED}` : `network.rules cannot be applied on node "${nodeId}": ${TRANSFORMS_NEED}`);
}

/** An agent from before version 2 refuses the egress calls as unknown methods. */
function olderAgent(error: unknown): boolean {
  return error instanceof NodeChannelError && error.code === 'bad_call' && /unknown method/.test(error.message);
}

/** Why `node` cannot apply `network`'s extras, or undefined when it can (or there is nothing to apply). */
export async function egressProblemOn(node: SandboxNode, network: SandboxNetwork, transformsConfigured: boolean): Promise<PlatformError | undefined> {
  const { runtime } = node;
  if (hasTransforms(network)) {
    let available: unknown = false;
    if (transformsConfigured) available = await Promise.resolve(runtime.egressTransformsAvailable?.()).catch((error: unknown) => (olderAgent(error) ? 'old' : false));
    if (available === 'old') return new PlatformError('invalid', `network.rules cannot be applied on node "${node.nodeId}": ${TOO_OLD}`);
    if (available !== true) return transformsUnavailable(node.nodeId);
  }
  if (network.egressProxy) {
    const problem = runtime.egressUpstreamProblem
      ? await runtime.egressUpstreamProblem().catch((error: unknown) => (olderAgent(error) ? TOO_OLD : `its node did not answer (${(error as Error).message})`))
      : 'its runtime cannot tunnel sandbox egress';
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
  if (first && excluded.size === nodes.length) throw first.message.startsWith('network.rules') && !first.message.endsWith(TOO_OLD_END) ? transformsUnavailable() : first;
  return excluded;
}
