import type { FastifyInstance } from 'fastify';
import { apiKeyOrBearer } from '../http/presented-key.ts';
import { callerTeam } from '../http/request-team.ts';
import type { TeamDirectory } from './team-directory.ts';

export const TEAMS_PATH = '/teams';

/**
 * `GET /teams`: the reference's `Team[]` (`teamID`, `name`, `apiKey`, `isDefault`), here the caller's one team. The CLI
 * (`e2b auth login` / `auth configure`) calls it with `Authorization: Bearer <token>` and stores the chosen team's
 * `apiKey` as the key for every later command. Tidepool keeps only hashes of its keys, so `apiKey` is the key the caller
 * authenticated with (it already holds it; no other key is ever disclosed). `isDefault` is true: it is the caller's
 * default (and only) team. The auth hook has checked that key before this runs.
 */
export function registerTeamRoutes(app: FastifyInstance, teams: TeamDirectory): void {
  app.get(TEAMS_PATH, { config: { auth: 'team', bearer: true } }, async (request) => {
    const apiKey = apiKeyOrBearer(request.headers) ?? '';
    const team = await teams.team(callerTeam(request));
    return team ? [{ teamID: team.teamID, name: team.name, apiKey, isDefault: true }] : [];
  });
}
