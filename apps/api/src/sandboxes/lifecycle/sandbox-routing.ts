import type { ClusterImages } from '../../nodes/cluster-images.ts';
import type { RoutableSandbox } from '../../proxy/sandbox-directory.ts';
import type { NodeSet } from '../../nodes/node-set.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

/** Routing facts for the proxy; streams of a node on another machine are opened through its dial. */
export function routable(record: SandboxRecord, dial: RoutableSandbox['dial']): RoutableSandbox {
  return {
    dial,
    sandboxId: record.sandboxId,
    state: record.state,
    address: record.address ?? undefined,
    envdAccessToken: record.envdAccessToken,
    trafficAccessToken: record.trafficAccessToken,
    maskRequestHost: record.network.maskRequestHost,
    httpsPorts: record.network.httpsPorts ?? [],
    // A filesystem-only pause cold-boots on resume: like the reference, traffic may not wake it.
    autoResume: record.autoResume && record.pausedImage === null,
  };
}

/**
 * Why a record cannot be used now, or undefined (the registry's `unavailable`): its node was lost, or it is one this
 * API replica does not drive (`shared`: API replicas on one database; another replica's own engine).
 */
export function sandboxUnavailability(nodes: NodeSet, images: ClusterImages, shared: boolean): (record: SandboxRecord) => string | undefined {
  return (record) => nodes.lostReason(record, record.sandboxId) ?? undrivable(nodes, images, shared, record);
}

/** Why a record is not served here: its node is one this API replica does not drive (another replica's own engine). */
function undrivable(nodes: NodeSet, images: ClusterImages, shared: boolean, record: SandboxRecord): string | undefined {
  if (!shared || nodes.has(record.nodeId)) return undefined;
  // Paused to the registry: any node this replica drives can resume it.
  if (!record.containerId && images.movable(record.pausedImage)) return undefined;
  return `Sandbox "${record.sandboxId}" is not available through this API replica: its node "${record.nodeId}" is not driven by it`;
}
