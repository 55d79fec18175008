import type { ClusterImages } from '../../nodes/cluster-images.ts';
import type { RoutableSandbox } from '../../proxy/sandbox-directory.ts';
import type { LifecycleDeps } from './lifecycle-context.ts';
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

/** Why a record is not served here: its node is one this API replica does not drive (another replica's own engine). */
export function undrivable(deps: LifecycleDeps, images: ClusterImages, record: SandboxRecord): string | undefined {
  if (!deps.shared || deps.nodes.has(record.nodeId)) return undefined;
  // Paused to the registry: any node this replica drives can resume it.
  if (!record.containerId && images.movable(record.pausedImage)) return undefined;
  return `Sandbox "${record.sandboxId}" is not available through this API replica: its node "${record.nodeId}" is not driven by it`;
}
