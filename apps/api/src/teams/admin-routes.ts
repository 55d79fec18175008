import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../errors.ts';
import { GENERATED_KEY_LENGTH, type KeyStore, type StoredKeyInfo } from '../store/key-store.ts';
import type { TeamDirectory } from './team-directory.ts';
import { ADMIN_ROUTE } from '../http/route-auth.ts';

/** Every route under this prefix takes the admin key (api-key-auth.ts) and no team's key. */
export const ADMIN_PREFIX = '/admin';

const NameBody = Type.Object({ name: Type.String({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f]+$' }) }, { additionalProperties: false });
const TeamParams = Type.Object({ teamID: Type.String({ minLength: 1, maxLength: 100 }) });
const KeyParams = Type.Object({ teamID: Type.String({ minLength: 1, maxLength: 100 }), apiKeyID: Type.String({ minLength: 1, maxLength: 100 }) });

/** The reference's `IdentifierMaskingDetails`: enough of a key to recognise it. */
function maskOf(info: StoredKeyInfo) {
  return {
    prefix: info.prefix.slice(0, 4),
    valueLength: GENERATED_KEY_LENGTH - 4,
    maskedValuePrefix: info.prefix.slice(4),
    maskedValueSuffix: info.suffix,
  };
}

/** The reference's `TeamAPIKey`. */
const keyView = (info: StoredKeyInfo) => ({ id: info.keyId, name: info.name, mask: maskOf(info), createdAt: info.createdAt, createdBy: null, lastUsed: null });

/**
 * Team and key administration with the admin key: `POST|GET /admin/teams`, `POST|GET /admin/teams/{teamID}/api-keys`
 * (a new key is in the answer once, as the reference's `CreatedTeamAPIKey`), `DELETE /admin/teams/{teamID}/api-keys/{apiKeyID}`
 * (revoked at once: keys are read at every request).
 */
export function registerAdminRoutes(app: FastifyInstance, teams: TeamDirectory, keys: KeyStore): void {
  const requireTeam = async (teamID: string) => {
    const team = await teams.team(teamID);
    if (!team) throw notFound(`team '${teamID}' not found`);
    return team;
  };

  app.post(`${ADMIN_PREFIX}/teams`, { config: ADMIN_ROUTE, schema: { body: NameBody } }, async (request, reply) => {
    const team = await teams.createTeam((request.body as Static<typeof NameBody>).name);
    request.log.info({ teamId: team.teamID, name: team.name }, 'team created');
    return reply.code(201).send(team);
  });

  app.get(`${ADMIN_PREFIX}/teams`, { config: ADMIN_ROUTE }, async () => teams.teams());

  app.get(`${ADMIN_PREFIX}/teams/:teamID`, { config: ADMIN_ROUTE, schema: { params: TeamParams } }, async (request) => requireTeam((request.params as Static<typeof TeamParams>).teamID));

  app.post(`${ADMIN_PREFIX}/teams/:teamID/api-keys`, { config: ADMIN_ROUTE, schema: { params: TeamParams, body: NameBody } }, async (request, reply) => {
    const team = await requireTeam((request.params as Static<typeof TeamParams>).teamID);
    const { key, info } = await keys.generateKey(team.teamID, (request.body as Static<typeof NameBody>).name);
    request.log.info({ teamId: team.teamID, apiKeyId: info.keyId }, 'API key created');
    return reply.code(201).send({ ...keyView(info), key });
  });

  app.get(`${ADMIN_PREFIX}/teams/:teamID/api-keys`, { config: ADMIN_ROUTE, schema: { params: TeamParams } }, async (request) => {
    const team = await requireTeam((request.params as Static<typeof TeamParams>).teamID);
    return (await keys.keysOf(team.teamID)).map(keyView);
  });

  app.delete(`${ADMIN_PREFIX}/teams/:teamID/api-keys/:apiKeyID`, { config: ADMIN_ROUTE, schema: { params: KeyParams } }, async (request, reply) => {
    const { teamID, apiKeyID } = request.params as Static<typeof KeyParams>;
    await requireTeam(teamID);
    if (!(await keys.revoke(teamID, apiKeyID))) throw notFound(`API key '${apiKeyID}' not found in team '${teamID}'`);
    request.log.info({ teamId: teamID, apiKeyId: apiKeyID }, 'API key revoked');
    return reply.code(204).send();
  });
}
