import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../errors.ts';
import type { SandboxLifecycle } from '../sandboxes/sandbox-lifecycle.ts';
import type { SandboxRecord } from '../sandboxes/sandbox-record.ts';
import { listedSandboxView } from '../sandboxes/sandbox-views.ts';
import type { NodeSet } from './node-set.ts';
import type { NodeRow, NodeStatus, NodeStore } from './node-store.ts';

export interface NodeRouteDeps {
  store: NodeStore;
  set: NodeSet;
  lostAfterSeconds: number;
}

const NodeParams = Type.Object({ nodeID: Type.String({ minLength: 1, maxLength: 63, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' }) });
const NodeQuery = Type.Object({ clusterID: Type.Optional(Type.String({ maxLength: 200 })) }, { additionalProperties: true });

/** One cluster per platform: the reference's `clusterID`. */
export const CLUSTER_ID = 'default';

/** The reference's NodeStatus: a lost node is `unhealthy`, one back but not reconciled yet `connecting`. */
const WIRE_STATUS: Record<NodeStatus, string> = { ready: 'ready', draining: 'draining', lost: 'unhealthy', returning: 'connecting' };

const MIB = 1024 * 1024;

/** The reference's `Node` fields shared by the list and the detail, from a node row and the sandboxes placed on it. */
function nodeFields(row: NodeRow, sandboxes: SandboxRecord[], nodes: NodeSet) {
  const holding = sandboxes.filter((r) => r.containerId);
  const { successes, fails } = nodes.startOutcomes(row.nodeId);
  return {
    id: row.nodeId,
    nodeID: row.nodeId,
    serviceInstanceID: row.nodeId,
    clusterID: CLUSTER_ID,
    version: row.version,
    commit: '',
    status: WIRE_STATUS[row.status],
    machineInfo: { cpuFamily: '', cpuModel: '', cpuModelName: '', cpuArchitecture: process.arch },
    metrics: {
      allocatedCPU: holding.reduce((sum, r) => sum + r.cpuCount, 0),
      allocatedMemoryBytes: holding.reduce((sum, r) => sum + r.memoryMB, 0) * MIB,
      cpuCount: row.capacity.cpuCount,
      cpuPercent: 0,
      memoryTotalBytes: row.capacity.memoryMB * MIB,
      memoryUsedBytes: Math.max(0, row.capacity.memoryMB - row.capacity.memoryAvailableMB) * MIB,
      disks: [],
    },
    createSuccesses: successes,
    createFails: fails,
    /** Tidepool: when the node last heartbeated. */
    lastHeartbeatAt: new Date(row.lastHeartbeat).toISOString(),
  };
}

/**
 * `GET /nodes`, `GET /nodes/{nodeID}` (admin in the reference): the node table with status, capacity and sandbox counts.
 * TODO(teams): these take any API key until the admin key from the teams work lands; then they require it.
 */
export function registerNodeRoutes(app: FastifyInstance, deps: NodeRouteDeps, lifecycle: SandboxLifecycle): void {
  const onNode = (nodeId: string): SandboxRecord[] => lifecycle.registry.all().filter((r) => r.nodeId === nodeId);
  app.get('/nodes', { schema: { querystring: NodeQuery } }, async () => {
    const rows = await deps.store.list();
    return rows.map((row) => {
      const sandboxes = onNode(row.nodeId);
      return { ...nodeFields(row, sandboxes, deps.set), sandboxCount: sandboxes.length, sandboxStartingCount: deps.set.startingOn(row.nodeId) };
    });
  });
  app.get('/nodes/:nodeID', { schema: { params: NodeParams, querystring: NodeQuery } }, async (request) => {
    const { nodeID } = request.params as Static<typeof NodeParams>;
    const row = await deps.store.get(nodeID);
    if (!row) throw notFound(`node "${nodeID}" not found`);
    const sandboxes = onNode(row.nodeId);
    return {
      ...nodeFields(row, sandboxes, deps.set),
      sandboxCount: sandboxes.length,
      sandboxStartingCount: deps.set.startingOn(row.nodeId),
      sandboxes: sandboxes.map(listedSandboxView),
      cachedBuilds: row.capacity.images ?? [],
    };
  });
}
