import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalid, notFound } from '../../errors.ts';
import { keysetPage, parseLimit } from '../../http/keyset-page.ts';
import { callerTeam } from '../../http/request-team.ts';
import { mayAccess, namesOf } from '../template-catalog.ts';
import { buildView, templateView } from '../template-views.ts';
import type { TemplateRouteDeps } from './template-route-deps.ts';
import { AliasParams, PageQuery, RegisterV2Body, RegisterV3Body, TemplateParams, UpdateTemplateBody } from './template-schemas.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

const DEFAULT_CPU = 2;
const DEFAULT_MEMORY_MB = 1024;

/** Registering, listing, reading, updating and deleting templates; alias checks. */
export function registerTemplateRoutes(app: FastifyInstance, deps: TemplateRouteDeps): void {
  const { catalog, store } = deps;

  app.post('/v3/templates', { config: TEAM_ROUTE, schema: { body: RegisterV3Body } }, async (request, reply) => {
    const body = request.body as Static<typeof RegisterV3Body>;
    const name = body.name ?? body.alias;
    if (name === undefined) throw invalid('name is required');
    deps.queue.ensureRoom();
    await deps.queue.ensureTeamRoom(callerTeam(request));
    const { template, build } = await catalog.registerBuild({ teamId: callerTeam(request), name, tags: body.tags, cpuCount: body.cpuCount ?? DEFAULT_CPU, memoryMB: body.memoryMB ?? DEFAULT_MEMORY_MB });
    return reply.code(202).send({
      templateID: template.templateId,
      buildID: build.buildId,
      public: template.public,
      names: namesOf(template),
      tags: build.requestedTags,
      aliases: namesOf(template),
    });
  });

  app.post('/v2/templates', { config: TEAM_ROUTE, schema: { body: RegisterV2Body } }, async (request, reply) => {
    const body = request.body as Static<typeof RegisterV2Body>;
    deps.queue.ensureRoom();
    await deps.queue.ensureTeamRoom(callerTeam(request));
    const { template } = await catalog.registerBuild({ teamId: callerTeam(request), name: body.alias, cpuCount: body.cpuCount ?? DEFAULT_CPU, memoryMB: body.memoryMB ?? DEFAULT_MEMORY_MB });
    return reply.code(202).send(templateView(template, await store.builds(template.templateId)));
  });

  /** The team's templates and the built-ins (other teams' public templates are usable by name, not listed). */
  const list = async (request: FastifyRequest, reply: { header(name: string, value: string): unknown }) => {
    const query = request.query as Static<typeof PageQuery>;
    const teamId = callerTeam(request);
    const templates = (await store.templates('template')).filter((t) => mayAccess(t, teamId, 'read'));
    const page = keysetPage(templates, (t) => `${t.createdAt}\u0000${t.templateId}`, parseLimit(query.limit), query.nextToken);
    if (page.nextToken) reply.header('x-next-token', page.nextToken);
    return Promise.all(page.items.map(async (t) => templateView(t, await store.builds(t.templateId))));
  };
  app.get('/templates', { config: TEAM_ROUTE, schema: { querystring: PageQuery } }, list);
  app.get('/v2/templates', { config: TEAM_ROUTE, schema: { querystring: PageQuery } }, list);

  app.get('/templates/:templateID', { config: TEAM_ROUTE, schema: { params: TemplateParams, querystring: PageQuery } }, async (request, reply) => {
    const template = await catalog.require((request.params as Static<typeof TemplateParams>).templateID, callerTeam(request));
    const query = request.query as Static<typeof PageQuery>;
    const builds = await store.builds(template.templateId);
    const page = keysetPage(builds, (b) => `${String(9e15 - Date.parse(b.createdAt)).padStart(16, '0')}\u0000${b.buildId}`, parseLimit(query.limit), query.nextToken);
    if (page.nextToken) void reply.header('x-next-token', page.nextToken);
    return {
      templateID: template.templateId,
      public: template.public,
      aliases: namesOf(template),
      names: namesOf(template),
      createdAt: template.createdAt,
      updatedAt: template.updatedAt,
      lastSpawnedAt: template.lastSpawnedAt,
      spawnCount: template.spawnCount,
      builds: page.items.map(buildView),
    };
  });

  const update = async (request: FastifyRequest) => {
    const { templateID } = request.params as Static<typeof TemplateParams>;
    const body = request.body as Static<typeof UpdateTemplateBody>;
    const teamId = callerTeam(request);
    const template = body.public === undefined ? await catalog.require(templateID, teamId, 'write') : await catalog.setPublic(templateID, body.public, teamId);
    return { names: namesOf(template) };
  };
  app.patch('/templates/:templateID', { config: TEAM_ROUTE, schema: { params: TemplateParams, body: UpdateTemplateBody } }, update);
  app.patch('/v2/templates/:templateID', { config: TEAM_ROUTE, schema: { params: TemplateParams, body: UpdateTemplateBody } }, update);

  app.delete('/templates/:templateID', { config: TEAM_ROUTE, schema: { params: TemplateParams } }, async (request, reply) => {
    await deps.remove((request.params as Static<typeof TemplateParams>).templateID, callerTeam(request));
    return reply.code(204).send();
  });

  app.get('/templates/aliases/:alias', { config: TEAM_ROUTE, schema: { params: AliasParams } }, async (request) => {
    const { alias } = request.params as Static<typeof AliasParams>;
    const template = await catalog.find(alias, callerTeam(request), 'use');
    if (!template || template.alias === null) throw notFound(`template alias '${alias}' not found`);
    return { templateID: template.templateId, public: template.public };
  });
}
