import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { keysetPage, parseLimit } from '../http/keyset-page.ts';
import { callerTeam } from '../http/request-team.ts';
import { NewSecretBody, SecretListQuery, SecretParams, SecretUpdateBody } from './secret-schemas.ts';
import type { SecretStore } from './secret-store.ts';
import { TEAM_ROUTE } from '../http/route-auth.ts';

/** `/secrets` as the SDK's `Secret` class uses it (API key; the caller's team's secrets only). Answers carry metadata only, never a value. */
export function registerSecretRoutes(app: FastifyInstance, secrets: SecretStore, logger: Logger): void {
  app.post('/secrets', { config: TEAM_ROUTE, schema: { body: NewSecretBody } }, async (request, reply) => {
    const body = request.body as Static<typeof NewSecretBody>;
    const secret = await secrets.create(callerTeam(request), body.name, body.value, body.metadata);
    logger.info({ secretId: secret.secretID, teamId: request.teamId, name: secret.name }, 'secret created');
    return reply.code(201).send(secret);
  });

  app.get('/secrets', { config: TEAM_ROUTE, schema: { querystring: SecretListQuery } }, async (request, reply) => {
    const query = request.query as Static<typeof SecretListQuery>;
    const page = keysetPage(await secrets.list(callerTeam(request)), (s) => s.name, parseLimit(query.limit), query.nextToken);
    if (page.nextToken) void reply.header('x-next-token', page.nextToken);
    return page.items;
  });

  app.get('/secrets/:secretID', { config: TEAM_ROUTE, schema: { params: SecretParams } }, async (request) => secrets.require(callerTeam(request), (request.params as Static<typeof SecretParams>).secretID));

  app.post('/secrets/:secretID', { config: TEAM_ROUTE, schema: { params: SecretParams, body: SecretUpdateBody } }, async (request) => {
    const body = request.body as Static<typeof SecretUpdateBody>;
    const secret = await secrets.update(callerTeam(request), (request.params as Static<typeof SecretParams>).secretID, body.value, body.metadata);
    logger.info({ secretId: secret.secretID, name: secret.name, version: secret.currentVersion }, 'secret updated');
    return secret;
  });

  app.delete('/secrets/:secretID', { config: TEAM_ROUTE, schema: { params: SecretParams } }, async (request, reply) => {
    const { secretID } = request.params as Static<typeof SecretParams>;
    await secrets.remove(callerTeam(request), secretID);
    logger.info({ secret: secretID }, 'secret destroyed');
    return reply.code(204).send();
  });
}
