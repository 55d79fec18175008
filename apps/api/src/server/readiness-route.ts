import type { FastifyInstance } from 'fastify';
import { OPEN_ROUTE } from '../http/route-auth.ts';
import type { NodeStatus } from '../nodes/node-store.ts';
import type { Sql } from '../store/sql.ts';

/** How long the database may take to answer `SELECT 1` before the platform counts as not ready. */
const DATABASE_DEADLINE_MS = 2_000;

export interface ReadinessDeps {
  database: Pick<Sql, 'get'>;
  /** The status of every node this API drives. */
  nodeStatuses(): Array<NodeStatus | undefined>;
}

export interface Readiness {
  ready: boolean;
  database: 'ok' | 'unreachable';
  nodes: { ready: number; total: number };
}

/** Ready: the database answers within its deadline and at least one node takes sandboxes. */
export async function checkReadiness(deps: ReadinessDeps): Promise<Readiness> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('deadline')), DATABASE_DEADLINE_MS);
  });
  const database = await Promise.race([deps.database.get('SELECT 1 AS one'), deadline]).then(
    () => 'ok' as const,
    () => 'unreachable' as const,
  );
  clearTimeout(timer);
  const statuses = deps.nodeStatuses();
  const nodes = { ready: statuses.filter((status) => status === 'ready').length, total: statuses.length };
  return { ready: database === 'ok' && nodes.ready > 0, database, nodes };
}

/**
 * `GET /ready` (open, for load balancers and orchestrators): 200 `{status: "ready", database, nodes}` when the
 * database answers and a node takes sandboxes, else 503 in the API's error shape with the same facts. `/health`
 * stays the liveness answer (the process serves HTTP).
 */
export function registerReadyRoute(app: FastifyInstance, deps: ReadinessDeps): void {
  app.get('/ready', { config: OPEN_ROUTE }, async (request, reply) => {
    const { ready, database, nodes } = await checkReadiness(deps);
    reply.header('cache-control', 'no-store');
    if (ready) return reply.code(200).send({ status: 'ready', database, nodes });
    const why = database !== 'ok' ? 'the database does not answer' : 'no node takes sandboxes';
    request.log.warn({ database, nodes }, `not ready: ${why}`);
    return reply.code(503).send({ code: 503, message: `not ready: ${why}`, database, nodes });
  });
}
