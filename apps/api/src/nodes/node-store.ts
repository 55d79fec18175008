import { conflict, invalid, notFound } from '../errors.ts';
import type { Sql } from '../store/sql.ts';
import type { NodeCapacity, NodeHeartbeats, NodeRegistration } from './sandbox-node.ts';

/**
 * `ready`: placeable. `draining`: keeps its sandboxes, gets no new ones. `lost`: stopped heartbeating (its
 * sandboxes with a container answer 404). `returning`: heartbeating again after it was lost, not placeable until
 * one replica has reconciled it (then `ready`).
 */
export type NodeStatus = 'ready' | 'draining' | 'lost' | 'returning';

export interface NodeRow {
  nodeId: string;
  url: string;
  version: string;
  capacity: NodeCapacity;
  status: NodeStatus;
  /** Milliseconds since the epoch of the last heartbeat (or the registration). */
  lastHeartbeat: number;
  registeredAt: string;
  /** SHA-256 fingerprint of the certificate the node's agent presented; '' for a node run in an API process. */
  identity: string;
}

interface Row {
  node_id: string;
  url: string;
  version: string;
  capacity: string;
  status: NodeStatus;
  last_heartbeat: number | string;
  registered_at: string;
  identity: string | null;
}

const fromRow = (row: Row): NodeRow => ({
  nodeId: row.node_id,
  url: row.url,
  version: row.version,
  capacity: JSON.parse(row.capacity) as NodeCapacity,
  status: row.status,
  // PostgreSQL hands BIGINT back as text.
  lastHeartbeat: Number(row.last_heartbeat),
  registeredAt: row.registered_at,
  identity: row.identity ?? '',
});

/** Node ids are labels, URLs path parts and log fields: short, plain. */
export const NODE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

const MAX_IMAGES = 1000;
const MAX_TEXT = 2048;
const isCount = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= Number.MAX_SAFE_INTEGER;

/** What is wrong with a capacity a node reports (it decides placement: nothing unchecked goes in), or undefined. */
export function capacityProblem(capacity: unknown): string | undefined {
  if (typeof capacity !== 'object' || capacity === null) return 'capacity must be an object';
  const c = capacity as Record<string, unknown>;
  for (const key of ['cpuCount', 'memoryMB', 'memoryAvailableMB']) if (!isCount(c[key])) return `capacity.${key} must be a finite number >= 0`;
  if (c.images !== undefined) {
    if (!Array.isArray(c.images) || c.images.length > MAX_IMAGES) return `capacity.images must be an array of at most ${MAX_IMAGES} image names`;
    if (c.images.some((image) => typeof image !== 'string' || image.length === 0 || image.length > MAX_TEXT)) return 'capacity.images must hold image names';
  }
  if (c.poolReady !== undefined) {
    if (typeof c.poolReady !== 'object' || c.poolReady === null || Array.isArray(c.poolReady)) return 'capacity.poolReady must be an object of counts';
    const entries = Object.entries(c.poolReady);
    if (entries.length > MAX_IMAGES || entries.some(([key, count]) => key.length > MAX_TEXT || !Number.isInteger(count) || !isCount(count))) return 'capacity.poolReady must map pool keys to whole counts';
  }
  return undefined;
}

function checkCapacity(nodeId: string, capacity: unknown): void {
  const problem = capacityProblem(capacity);
  if (problem) throw invalid(`node "${nodeId}" reported an invalid capacity: ${problem}`);
}

/**
 * The `nodes` table: what every node agent announced, its last heartbeat and its status. Shared by the API replicas
 * (PostgreSQL in cluster mode); every status change is one conditional UPDATE, so exactly one replica makes it.
 */
export class NodeStore implements NodeHeartbeats {
  constructor(private readonly sql: Sql, private readonly now: () => number = Date.now) {}

  /**
   * A node announcing itself (again): its URL, version, capacity, identity and registration time are replaced (a new
   * registration time tells the API replicas the agent restarted); a draining node stays draining.
   *
   * An id already held by a live node (heartbeat within `liveWithinMs`, not lost) at another URL under another
   * certificate is refused with a conflict and its row left as it was: one UPDATE decides, so replicas racing two
   * claimants agree. Without `liveWithinMs` only a lost node's id may change hands this way.
   */
  async register(node: NodeRegistration, options: { liveWithinMs?: number } = {}): Promise<void> {
    if (typeof node.nodeId !== 'string' || !NODE_ID_PATTERN.test(node.nodeId)) throw invalid(`node id ${JSON.stringify(node.nodeId)} is not valid: letters, digits, '.', '_' and '-', at most 63`);
    if (typeof node.url !== 'string' || node.url.length > MAX_TEXT || typeof node.version !== 'string' || node.version.length > 200) throw invalid(`node "${node.nodeId}": url and version must be short strings`);
    const identity = node.identity ?? '';
    if (typeof identity !== 'string' || identity.length > 200) throw invalid(`node "${node.nodeId}": identity must be a short string`);
    const registeredAt = node.registeredAt ?? new Date(this.now()).toISOString();
    if (typeof registeredAt !== 'string' || registeredAt.length > 64) throw invalid(`node "${node.nodeId}": registeredAt must be a short string`);
    checkCapacity(node.nodeId, node.capacity);
    const now = this.now();
    const staleBefore = options.liveWithinMs === undefined ? 0 : now - options.liveWithinMs;
    const changed = await this.sql.run(
      `INSERT INTO nodes (node_id, url, version, capacity, status, last_heartbeat, registered_at, identity) VALUES (?, ?, ?, ?, 'ready', ?, ?, ?)
       ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, version = excluded.version, capacity = excluded.capacity,
         last_heartbeat = excluded.last_heartbeat, registered_at = excluded.registered_at, identity = excluded.identity,
         status = CASE WHEN nodes.status = 'lost' THEN 'returning' ELSE nodes.status END
       WHERE nodes.url = excluded.url OR nodes.identity = excluded.identity OR nodes.status = 'lost' OR nodes.last_heartbeat < ?`,
      [node.nodeId, node.url, node.version, JSON.stringify(node.capacity), now, registeredAt, identity, staleBefore],
    );
    if (changed !== 1) throw conflict(`node id "${node.nodeId}" is held by a live node at another address with another certificate; ${node.url.slice(0, 200)} may not take it`);
  }

  /** A registered node is alive and has `capacity`; a lost one becomes `returning`. An unknown node is refused. */
  async heartbeat(nodeId: string, capacity: NodeCapacity): Promise<void> {
    checkCapacity(nodeId, capacity);
    const changed = await this.sql.run(
      `UPDATE nodes SET capacity = ?, last_heartbeat = ?, status = CASE WHEN status = 'lost' THEN 'returning' ELSE status END WHERE node_id = ?`,
      [JSON.stringify(capacity), this.now(), nodeId],
    );
    if (changed !== 1) throw notFound(`node "${nodeId}" is not registered; register it before it heartbeats`);
  }

  async list(): Promise<NodeRow[]> {
    return (await this.sql.all<Row>('SELECT * FROM nodes ORDER BY node_id')).map(fromRow);
  }

  async get(nodeId: string): Promise<NodeRow | undefined> {
    const row = await this.sql.get<Row>('SELECT * FROM nodes WHERE node_id = ?', [nodeId]);
    return row && fromRow(row);
  }

  /**
   * Marks lost every node whose last heartbeat is older than `lostAfterMs`; resolves with the ids this call changed
   * (of replicas sweeping together, each node is reported by exactly one).
   */
  async markLost(lostAfterMs: number): Promise<string[]> {
    const rows = await this.sql.all<{ node_id: string }>(
      `UPDATE nodes SET status = 'lost' WHERE status <> 'lost' AND last_heartbeat < ? RETURNING node_id`,
      [this.now() - lostAfterMs],
    );
    return rows.map((r) => r.node_id).sort();
  }

  /** Moves a node from `from` to `to`; false when it was not in `from` (someone else moved it, or it is gone). */
  async transition(nodeId: string, from: NodeStatus, to: NodeStatus): Promise<boolean> {
    return (await this.sql.run('UPDATE nodes SET status = ? WHERE node_id = ? AND status = ?', [to, nodeId, from])) === 1;
  }
}
