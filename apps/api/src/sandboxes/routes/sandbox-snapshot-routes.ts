import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { statusOf } from '../../http/api-errors.ts';
import { keysetPage, parseLimit } from '../../http/keyset-page.ts';
import { callerTeam } from '../../http/request-team.ts';
import { ownedSandboxId } from './owned-sandbox.ts';
import { type ForkDeps, forkSandbox } from '../lifecycle/sandbox-forks.ts';
import { normalizeSandboxId } from '../sandbox-identity.ts';
import { createSnapshot, type SnapshotDeps } from '../lifecycle/sandbox-snapshots.ts';
import { sandboxView } from '../sandbox-views.ts';
import { SandboxParams } from './sandbox-schemas.ts';
import { positiveTimeout, type TimeoutRules } from './timeout-rules.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

const SnapshotBody = Type.Object({ name: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })) }, { additionalProperties: true });
const ForkBody = Type.Object({ timeout: Type.Optional(Type.Integer()), count: Type.Optional(Type.Integer()) }, { additionalProperties: true });
const SnapshotQuery = Type.Object(
  {
    sandboxID: Type.Optional(Type.String({ maxLength: 100 })),
    name: Type.Optional(Type.String({ maxLength: 300 })),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$' })),
    nextToken: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: true },
);

/** Snapshots of sandboxes (templates made from them) and forks. `sandboxDomain`: the `domain` answered for forks. */
export function registerSandboxSnapshotRoutes(app: FastifyInstance, deps: SnapshotDeps & ForkDeps, timeouts: TimeoutRules, sandboxDomain: () => string | null = () => null): void {
  app.post('/sandboxes/:sandboxID/snapshots', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: SnapshotBody } }, async (request, reply) => {
    const id = ownedSandboxId(deps.lifecycle, request);
    const info = await createSnapshot(deps, id, (request.body as Static<typeof SnapshotBody>).name);
    return reply.code(201).send(info);
  });

  app.get('/snapshots', { config: TEAM_ROUTE, schema: { querystring: SnapshotQuery } }, async (request, reply) => {
    const query = request.query as Static<typeof SnapshotQuery>;
    const all = await deps.catalog.snapshots({ teamId: callerTeam(request), sandboxId: query.sandboxID === undefined ? undefined : normalizeSandboxId(query.sandboxID), name: query.name });
    const page = keysetPage(all, (s) => `${s.createdAt}\u0000${s.key}`, parseLimit(query.limit), query.nextToken);
    if (page.nextToken) void reply.header('x-next-token', page.nextToken);
    return page.items.map(({ snapshotID, names }) => ({ snapshotID, names }));
  });

  app.post('/sandboxes/:sandboxID/fork', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: ForkBody } }, async (request, reply) => {
    const id = ownedSandboxId(deps.lifecycle, request);
    const body = request.body as Static<typeof ForkBody>;
    const count = body.count ?? 1;
    const results = await forkSandbox(deps, id, count, positiveTimeout(timeouts, body.timeout));
    return reply.code(201).send(
      results.map((result) =>
        result.ok ? { sandbox: sandboxView(result.record, sandboxDomain()) } : { error: { code: statusOf(result.error), message: result.error.message } },
      ),
    );
  });
}
