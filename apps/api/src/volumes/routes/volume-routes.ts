import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { callerTeam } from '../../http/request-team.ts';
import type { VolumeCatalog } from '../volume-catalog.ts';
import type { Volume } from '../volume-model.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

/** Bounded before the catalog applies the name rule (which answers with a clear message). */
const NewVolumeBody = Type.Object({ name: Type.String({ maxLength: 1000 }) }, { additionalProperties: true });
const VolumeParams = Type.Object({ volumeID: Type.String({ minLength: 1, maxLength: 128 }) });

/** `VolumeAndToken`: no `domain`, so the SDK reaches the content API at `E2B_VOLUME_API_URL` (this platform's origin). */
const volumeAndToken = (v: Volume) => ({ volumeID: v.volumeID, name: v.name, token: v.token });

/** `POST/GET /volumes`, `GET/DELETE /volumes/{volumeID}` (API key; the caller's team's volumes only). */
export function registerVolumeRoutes(app: FastifyInstance, volumes: VolumeCatalog): void {
  app.post('/volumes', { config: TEAM_ROUTE, schema: { body: NewVolumeBody } }, async (request, reply) => {
    const volume = await volumes.create(callerTeam(request), (request.body as Static<typeof NewVolumeBody>).name);
    return reply.code(201).send(volumeAndToken(volume));
  });

  app.get('/volumes', { config: TEAM_ROUTE }, async (request) => (await volumes.listOf(callerTeam(request))).map((v) => ({ volumeID: v.volumeID, name: v.name })));

  app.get('/volumes/:volumeID', { config: TEAM_ROUTE, schema: { params: VolumeParams } }, async (request) =>
    volumeAndToken(await volumes.require((request.params as Static<typeof VolumeParams>).volumeID, callerTeam(request))),
  );

  app.delete('/volumes/:volumeID', { config: TEAM_ROUTE, schema: { params: VolumeParams } }, async (request, reply) => {
    await volumes.remove((request.params as Static<typeof VolumeParams>).volumeID, callerTeam(request));
    return reply.code(204).send();
  });
}
