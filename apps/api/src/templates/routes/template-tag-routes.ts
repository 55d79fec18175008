import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { callerTeam } from '../../http/request-team.ts';
import type { TemplateRouteDeps } from './template-route-deps.ts';
import { AssignTagsBody, RemoveTagsBody, TemplateParams } from './template-schemas.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

/** Tags: names of builds within a template (`name:tag`). */
export function registerTemplateTagRoutes(app: FastifyInstance, deps: TemplateRouteDeps): void {
  app.post('/templates/tags', { config: TEAM_ROUTE, schema: { body: AssignTagsBody } }, async (request, reply) => {
    const body = request.body as Static<typeof AssignTagsBody>;
    const assigned = await deps.catalog.assignTags(body.target, body.tags, callerTeam(request));
    return reply.code(201).send({ buildID: assigned.buildId, tags: assigned.tags });
  });

  app.delete('/templates/tags', { config: TEAM_ROUTE, schema: { body: RemoveTagsBody } }, async (request, reply) => {
    const body = request.body as Static<typeof RemoveTagsBody>;
    await deps.catalog.removeTags(body.name, body.tags, callerTeam(request));
    return reply.code(204).send();
  });

  app.get('/templates/:templateID/tags', { config: TEAM_ROUTE, schema: { params: TemplateParams } }, async (request) => {
    const template = await deps.catalog.require((request.params as Static<typeof TemplateParams>).templateID, callerTeam(request));
    return (await deps.store.tags(template.templateId)).map((t) => ({ tag: t.tag, buildID: t.buildId, createdAt: t.createdAt }));
  });
}
