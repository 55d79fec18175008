import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { callerTeam } from '../../http/request-team.ts';
import { PlatformError } from '../../errors.ts';
import { decodeMetadataFilter, matchesMetadata, type Order, page, parseStates } from '../list-query.ts';
import { type NetworkUpdate, validateNetwork } from '../egress/network-rules.ts';
import { normaliseRules } from '../../runtime/network-transforms.ts';
import { parseEgressProxy } from '../egress/egress-proxy-settings.ts';
import { requireStoredSecrets } from '../../secrets/secret-placeholders.ts';
import { ownedSandboxId } from './owned-sandbox.ts';
import type { SandboxLifecycle } from '../lifecycle/sandbox-lifecycle.ts';
import { listedSandboxView, sandboxDetailView, sandboxView } from '../sandbox-views.ts';
import { ListQuery, NetworkUpdateSchema, NewSandboxSchema, SandboxParams } from './sandbox-schemas.ts';
import { positiveTimeout, type TimeoutRules } from './timeout-rules.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

/** Turns a validated NewSandbox body into a create request, applying the reference platform's rules. */
async function createInput(teamId: string, body: Static<typeof NewSandboxSchema>, timeouts: TimeoutRules, secretNames: SecretNames) {
  const timeout = positiveTimeout(timeouts, body.timeout);
  if (body.autoPauseMemory === false && !body.autoPause) throw new PlatformError('invalid', 'autoPauseMemory can only be set together with autoPause');
  if (body.autoPauseMemory === false && body.autoResume?.enabled) throw new PlatformError('invalid', 'autoPauseMemory false cannot be combined with autoResume');
  const network = { ...(body.network ?? {}) };
  if (body.allow_internet_access === false) network.denyOut = ['0.0.0.0/0'];
  await requireStoredSecrets(network.rules, () => secretNames(teamId));
  validateNetwork(network);
  return {
    teamId,
    templateRef: body.templateID,
    timeoutSeconds: timeout,
    autoPause: body.autoPause ?? false,
    autoPauseMemory: body.autoPauseMemory ?? true,
    autoResume: body.autoResume?.enabled ?? false,
    metadata: body.metadata ?? {},
    envVars: body.envVars ?? {},
    network: {
      allowPublicTraffic: network.allowPublicTraffic,
      allowOut: network.allowOut,
      denyOut: network.denyOut,
      maskRequestHost: network.maskRequestHost,
      httpsPorts: network.httpsPorts === undefined ? undefined : [...new Set(network.httpsPorts)].sort((a, b) => a - b),
      ...(network.rules === undefined || network.rules === null ? {} : { rules: normaliseRules(network.rules) }),
    },
    egressProxy: parseEgressProxy(network.egressProxy),
    allowInternetAccess: body.allow_internet_access ?? null,
    volumeMounts: (body.volumeMounts ?? []).map(({ name, path }) => ({ name, path })),
  };
}

/** The stored secret names of a team. */
type SecretNames = (teamId: string) => Promise<ReadonlySet<string>>;

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return 100;
  const limit = Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new PlatformError('invalid', 'limit must be between 1 and 100');
  return limit;
}

/**
 * Create, list, get and kill, each on the caller's team's sandboxes only. `sandboxDomain`: the `domain` answered (see sandboxView); `secretNames`: the stored secret
 * names of a team, which `${e2b.secrets.<name>}` placeholders in `network.rules` must refer to (unknown ones are named in a 400).
 */
export function registerSandboxRoutes(
  app: FastifyInstance,
  lifecycle: SandboxLifecycle,
  timeouts: TimeoutRules,
  sandboxDomain: () => string | null = () => null,
  secretNames: SecretNames = async () => new Set(),
): void {
  const create = async (request: FastifyRequest) =>
    sandboxView(await lifecycle.create(await createInput(callerTeam(request), request.body as Static<typeof NewSandboxSchema>, timeouts, secretNames)), sandboxDomain());
  app.post('/sandboxes', { config: TEAM_ROUTE, schema: { body: NewSandboxSchema } }, async (request, reply) => reply.code(201).send(await create(request)));
  app.post('/v2/sandboxes', { config: TEAM_ROUTE, schema: { body: NewSandboxSchema } }, async (request, reply) => reply.code(201).send(await create(request)));

  app.get('/sandboxes', { config: TEAM_ROUTE, schema: { querystring: ListQuery } }, async (request) => {
    const query = request.query as Static<typeof ListQuery>;
    const filter = decodeMetadataFilter(query.metadata);
    await lifecycle.caughtUp();
    return lifecycle
      .listOf(callerTeam(request))
      .filter((r) => r.state === 'running' && matchesMetadata(r, filter))
      .sort((a, b) => (a.startedAt < b.startedAt ? 1 : -1))
      .map(listedSandboxView);
  });

  app.get('/v2/sandboxes', { config: TEAM_ROUTE, schema: { querystring: ListQuery } }, async (request, reply) => {
    const query = request.query as Static<typeof ListQuery>;
    const states = parseStates(query.state);
    const filter = decodeMetadataFilter(query.metadata);
    const startedAfter = query.startedAfter === undefined ? undefined : Date.parse(query.startedAfter);
    if (Number.isNaN(startedAfter)) throw new PlatformError('invalid', `startedAfter '${query.startedAfter}' is not a date-time`);
    const order: Order = query.order ?? 'desc';
    await lifecycle.caughtUp();
    const matching = lifecycle.listOf(callerTeam(request)).filter(
      (r) =>
        states.has(r.state) &&
        matchesMetadata(r, filter) &&
        (query.template === undefined || r.templateId === query.template || r.alias === query.template) &&
        (startedAfter === undefined || Date.parse(r.startedAt) >= startedAfter),
    );
    const result = page(matching, order, parseLimit(query.limit), query.nextToken);
    if (result.nextToken) void reply.header('x-next-token', result.nextToken);
    return result.items.map(listedSandboxView);
  });

  app.get('/sandboxes/:sandboxID', { config: TEAM_ROUTE, schema: { params: SandboxParams } }, async (request) => {
    return sandboxDetailView(lifecycle.require(ownedSandboxId(lifecycle, request)), sandboxDomain());
  });

  app.put('/sandboxes/:sandboxID/network', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: NetworkUpdateSchema } }, async (request, reply) => {
    const id = ownedSandboxId(lifecycle, request);
    await requireStoredSecrets((request.body as NetworkUpdate).rules, () => secretNames(callerTeam(request)));
    await lifecycle.updateNetwork(id, request.body as NetworkUpdate);
    return reply.code(204).send();
  });

  app.delete('/sandboxes/:sandboxID', { config: TEAM_ROUTE, schema: { params: SandboxParams } }, async (request, reply) => {
    await lifecycle.kill(ownedSandboxId(lifecycle, request));
    return reply.code(204).send();
  });
}
