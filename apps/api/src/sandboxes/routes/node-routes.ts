import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { conflict, invalid, notFound } from '../../errors.ts';
import type { SandboxRegistry } from '../registry/sandbox-registry.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import { listedSandboxView } from '../sandbox-views.ts';
import type { NodeSet } from '../../nodes/node-set.ts';
import type { NodeRow, NodeStatus, NodeStore } from '../../nodes/node-store.ts';
import { ADMIN_ROUTE } from '../../http/route-auth.ts';

export interface NodeRouteDeps {
  store: NodeStore;
  set: NodeSet;
  lostAfterSeconds: number;
}

const NodeParams = Type.Object({ nodeID: Type.String({ minLength: 1, maxLength: 63, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' }) });
const NodeQuery = Type.Object({ clusterID: Type.Optional(Type.String({ maxLength: 200 })) }, { additionalProperties: true });
/** The reference's `NodeStatusChange`: any `NodeStatus` is well-formed; an operator may set `ready` and `draining`. */
const StatusChange = Type.Object(
  {
    status: Type.Union([Type.Literal('ready'), Type.Literal('draining'), Type.Literal('connecting'), Type.Literal('unhealthy'), Type.Literal('standby')]),
    clusterID: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

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
 * Drains (`draining`: no new placement, its sandboxes keep running and answering) or undrains (`ready`) a node; one
 * conditional UPDATE of its row, taken in by this replica at once and by the others at their next node sweep. The
 * statuses the platform decides (`unhealthy` = lost, `connecting` = returning) are not an operator's to set: 400;
 * a node that is lost or returning cannot be drained or undrained now: 409.
 */
async function changeStatus(deps: NodeRouteDeps, nodeId: string, wanted: 'ready' | 'draining'): Promise<{ from: NodeStatus }> {
  const other: NodeStatus = wanted === 'ready' ? 'draining' : 'ready';
  // Two tries: a heartbeat never changes ready/draining, so a lost race means another operator or the sweep moved it.
  for (let attempt = 0; attempt < 2; attempt++) {
    const row = await deps.store.get(nodeId);
    if (!row) throw notFound(`node "${nodeId}" not found`);
    if (row.status === wanted) return { from: row.status };
    if (row.status !== other) throw conflict(`node "${nodeId}" is ${WIRE_STATUS[row.status]}: only a ready or draining node can be set ${wanted}`);
    if (await deps.store.transition(nodeId, other, wanted)) return { from: other };
  }
  throw conflict(`node "${nodeId}" changed status while it was being set ${wanted}; try again`);
}

/**
 * `GET /nodes`, `GET /nodes/{nodeID}`, `POST /nodes/{nodeID}` (admin in the reference, and here: api-key-auth.ts):
 * the node table with status, capacity and sandbox counts; draining and undraining a node.
 */
export function registerNodeRoutes(app: FastifyInstance, deps: NodeRouteDeps, registry: Pick<SandboxRegistry, 'all'>): void {
  const onNode = (nodeId: string): SandboxRecord[] => registry.all().filter((r) => r.nodeId === nodeId);
  app.get('/nodes', { config: ADMIN_ROUTE, schema: { querystring: NodeQuery } }, async () => {
    const rows = await deps.store.list();
    return rows.map((row) => {
      const sandboxes = onNode(row.nodeId);
      return { ...nodeFields(row, sandboxes, deps.set), sandboxCount: sandboxes.length, sandboxStartingCount: deps.set.startingOn(row.nodeId) };
    });
  });
  app.get('/nodes/:nodeID', { config: ADMIN_ROUTE, schema: { params: NodeParams, querystring: NodeQuery } }, async (request) => {
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
  app.post('/nodes/:nodeID', { config: ADMIN_ROUTE, schema: { params: NodeParams, body: StatusChange } }, async (request, reply) => {
    const { nodeID } = request.params as Static<typeof NodeParams>;
    const { status, clusterID } = request.body as Static<typeof StatusChange>;
    if (clusterID !== undefined && clusterID !== CLUSTER_ID) throw notFound(`node "${nodeID}" not found in cluster "${clusterID}"`);
    if (status !== 'ready' && status !== 'draining') throw invalid(`status "${status}" is set by the platform, not by a request: send "draining" or "ready"`);
    const { from } = await changeStatus(deps, nodeID, status);
    deps.set.setStatus(nodeID, status);
    if (from !== status) request.log.info({ nodeId: nodeID, from, to: status }, status === 'draining' ? 'node drained: nothing new is placed on it' : 'node undrained: placeable again');
    return reply.code(204).send();
  });
}
