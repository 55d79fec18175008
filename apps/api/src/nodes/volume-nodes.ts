import type { VolumeNodes } from '../volumes/volume-catalog.ts';
import type { NodeSet } from './node-set.ts';

/**
 * Where volumes go and how they are reached, from the nodes this API drives: a node's volumes are usable while it is
 * not lost (a returning node is still reconciling). A new volume goes on the embedded node when there is one (as
 * before nodes existed), else on the ready node holding the fewest volumes (ties to the smaller id).
 */
export function volumeNodes(nodes: NodeSet): VolumeNodes {
  const usable = (nodeId: string): boolean => {
    const status = nodes.status(nodeId);
    return nodes.has(nodeId) && status !== 'lost' && status !== 'returning';
  };
  return {
    of: (nodeId) => (usable(nodeId) ? nodes.node(nodeId).volumes : undefined),
    choose(counts) {
      const embedded = nodes.embeddedId;
      if (embedded !== undefined && nodes.node(embedded).volumes) return usable(embedded) ? embedded : undefined;
      const candidates = nodes
        .all()
        .filter((node) => node.volumes && nodes.status(node.nodeId) === 'ready')
        .map((node) => ({ nodeId: node.nodeId, held: counts.get(node.nodeId) ?? 0 }))
        .sort((a, b) => a.held - b.held || (a.nodeId < b.nodeId ? -1 : 1));
      return candidates[0]?.nodeId;
    },
  };
}
