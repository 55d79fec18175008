/**
 * The volumes on a node agent's disk, served to the API over the node channel: directories made and removed by call
 * (`POST /v1/volumes/<create|remove|hostDir>`, arguments checked against the call table), and the volume-content API
 * for requests the API has already authorized with the volume's token (`/v1/volumecontent/<volumeID>/<dir|path|file>`,
 * the same routes and filesystem rules as the API's own, run by a Fastify instance that never listens). Only volume
 * ids as the catalog makes them reach the filesystem; the mutual-TLS channel is the only way in.
 */
import { existsSync, readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import { isVolumeMethod, schemaProblem, VOLUME_METHODS } from '../nodes/node-rpc-methods.ts';
import { ContentError } from '../volumes/content/content-errors.ts';
import type { VolumeStorage } from '../volumes/volume-storage.ts';

const VOLUME_ID = /^vol_[a-z0-9]{20}$/;
export const VOLUME_CONTENT_PATH = /^\/v1\/volumecontent\/(vol_[a-z0-9]{20})\/(dir|path|file)$/;

export interface AgentVolumes {
  /** Runs one checked volume call; a malformed one is a bad_call NodeChannelError. */
  call(method: string, body: unknown): Promise<unknown>;
  /** Serves a forwarded content request (its path matched VOLUME_CONTENT_PATH). */
  serveContent(request: IncomingMessage, response: ServerResponse): void;
  close(): Promise<void>;
}

const badCall = (message: string): NodeChannelError => new NodeChannelError('bad_call', message);

type Dispatch = (request: IncomingMessage, response: ServerResponse) => void;

/** The content routes' Fastify instance, ready, and the handler that runs a request through it. */
async function startContentApp(storage: VolumeStorage, logger: Logger, maxUploadBytes: number): Promise<{ dispatch: Dispatch; close: () => Promise<void> }> {
  const [{ default: Fastify }, { registerVolumeContentRoutes }] = await Promise.all([import('fastify'), import('../volumes/content/volume-content-routes.ts')]);
  let dispatch: Dispatch | undefined;
  const app = Fastify({
    logger: false,
    serverFactory: (handler) => {
      dispatch = handler;
      return createServer();
    },
  });
  registerVolumeContentRoutes(app, {
    // The API checked the volume's token; here the volume must only exist on this disk.
    access: async (volumeID) => {
      if (!VOLUME_ID.test(volumeID) || !existsSync(storage.contentDir(volumeID))) throw new ContentError(404, `volume "${volumeID.slice(0, 64)}" is not on this node`);
      return { dir: storage.contentDir(volumeID) };
    },
    directories: async () => readdirSync(storage.root).filter((name) => VOLUME_ID.test(name)).map((name): [string, string] => [name, storage.contentDir(name)]),
    logger,
    maxUploadBytes,
  });
  await app.ready();
  return { dispatch: dispatch!, close: () => app.close() };
}

export async function startAgentVolumes(storage: VolumeStorage, logger: Logger, maxUploadBytes: number): Promise<AgentVolumes> {
  storage.prepareRoot();
  // Made on the first content request: compiling its route schemas is most of an agent's start otherwise, and
  // the agent answers (health, sandboxes) without it.
  let content: ReturnType<typeof startContentApp> | undefined;
  const contentApp = (): ReturnType<typeof startContentApp> => {
    content ??= startContentApp(storage, logger, maxUploadBytes);
    return content;
  };
  return {
    async call(method, body) {
      if (!isVolumeMethod(method)) throw badCall(`unknown volume call ${JSON.stringify(method.slice(0, 64))}`);
      const args = (body as { args?: unknown } | null)?.args;
      const problem = schemaProblem(VOLUME_METHODS[method].args, args) ?? (Object.keys(body as object).some((k) => k !== 'args') ? 'unexpected field' : undefined);
      if (problem) throw badCall(`volumes/${method}: invalid arguments (${problem})`);
      const [volumeID] = args as [string];
      if (method === 'hostDir') return storage.hostDir(volumeID);
      if (method === 'create') {
        // Kept as it is when it exists: a create retried after an answer was lost does not fail.
        if (!existsSync(storage.contentDir(volumeID))) storage.create(volumeID);
        logger.info({ volumeID }, 'volume directory created');
      } else {
        storage.remove(volumeID);
        logger.info({ volumeID }, 'volume directory removed');
      }
      return null;
    },
    serveContent(request, response) {
      // The routes are the API's own, under /volumecontent/.
      request.url = (request.url ?? '').slice('/v1'.length);
      contentApp().then(
        (app) => app.dispatch(request, response),
        (error: unknown) => {
          logger.error({ err: error }, 'volume content routes could not start');
          if (!response.headersSent) response.writeHead(500, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ code: 500, message: 'volume content routes could not start on this node' }));
        },
      );
    },
    close: async () => {
      if (content) await (await content).close();
    },
  };
}
