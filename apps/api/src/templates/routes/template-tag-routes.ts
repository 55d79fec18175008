import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { callerTeam } from '../../http/request-team.ts';
import type { TemplateRouteDeps } from './template-route-deps.ts';
import { AssignTagsBody, RemoveTagsBody, TemplateParams } from './template-schemas.ts';

/** Tags: names of builds within a template (`name:tag`). */
export function registerTemplateTagRoutes(app: FastifyInstance, deps: TemplateRouteDeps): void {
  app.post('/templates/tags', { schema: { body: AssignTagsBody } }, async (request, reply) => {
    const body = request.body as Static<typeof AssignTagsBody>;
    const assigned = await deps.catalog.assignTags(body.target, body.tags, callerTeam(request));
    return reply.code(201).send({ buildID: assigned.buildId, tags: assigned.tags });
  });

  app.delete('/templates/tags', { schema: { body: RemoveTagsBody } }, async (request, reply) => {
    const body = request.body as Static<typeof RemoveTagsBody>;
    await deps.catalog.removeTags(body.name, body.tags, callerTeam(request));
    return reply.code(204).send();
  });

  app.get('/templates/:templateID/tags', { schema: { params: TemplateParams } }, async (request) => {
    const template = await deps.catalog.require((request.params as Static<typeof TemplateParams>).templateID, callerTeam(request));
    return (await deps.store.tags(template.templateId)).map((t) => ({ tag: t.tag, buildID: t.buildId, createdAt: t.createdAt }));
  });
}
