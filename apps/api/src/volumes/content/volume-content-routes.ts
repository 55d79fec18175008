import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { badRequest, ContentError, contentErrorBody, fromFsError } from './content-errors.ts';
import { listDirectory } from './dir-listing.ts';
import { parseDepth, parseMetadataBody, parseWriteQuery } from './entry-options.ts';
import { makeDirectory, statEntry, updateMetadata } from './entry-ops.ts';
import { OwnerPolicy } from './entry-owner.ts';
import { openDownload } from './file-download.ts';
import { uploadFile } from './file-upload.ts';
import { removeEntry } from './tree-removal.ts';
import { sweepUploadLeftovers } from './upload-leftovers.ts';
import { parseVolumePath, type VolumePath } from './volume-path.ts';
import { type DirHandle, openVolumeRoot } from './volume-tree.ts';
import { OPEN_ROUTE } from '../../http/route-auth.ts';

/**
 * Where a content request is served: the volume's directory in this process, or `forward` hands the raw request to
 * the process on the volume's node (which answers it whole: status, headers and body).
 */
export type ContentAccess = { dir: string } | { forward(request: IncomingMessage, response: ServerResponse): Promise<void> };

export interface VolumeContentDeps {
  /** Checks the request may act on the volume (a ContentError 401 otherwise) and says where its content is. */
  access(volumeID: string, authorization: string | string[] | undefined): Promise<ContentAccess>;
  /** The volume directories this process serves, by id (upload leftovers in them are swept at start). */
  directories(): Promise<Array<[string, string]>>;
  logger: Logger;
  /** Largest upload body accepted (TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES); a longer one is answered 413. */
  maxUploadBytes: number;
}

const Params = Type.Object({ volumeID: Type.String({ minLength: 1, maxLength: 128 }) });
type Query = Record<string, unknown>;
type ContentRequest = FastifyRequest<{ Params: { volumeID: string }; Querystring: Query }>;

/**
 * The volume-content API (`E2B_VOLUME_API_URL` = this platform's origin): `GET|POST …/dir`,
 * `GET|PATCH|DELETE …/path`, `GET|PUT …/file` under `/volumecontent/{volumeID}`. Authenticated by
 * the volume's bearer token alone; errors are `{code: "<status>", message}`.
 */
export function registerVolumeContentRoutes(app: FastifyInstance, deps: VolumeContentDeps): void {
  const startedAt = Date.now();
  app.addHook('onReady', async () => {
    // In the background: a large volume must not hold up the start.
    void sweepUploadLeftovers(await deps.directories(), startedAt, deps.logger);
  });
  void app.register(async (scope) => {
    const owners = new OwnerPolicy(deps.logger);
    scope.setErrorHandler((error: Error & { validation?: unknown; statusCode?: number }, request, reply) => {
      void answerError(error, undefined, request, reply);
    });
    /** The directory of each request served here (set before its body is read). */
    const dirs = new WeakMap<FastifyRequest, string>();

    // Authorized before any body is read; a volume on another node gets the raw request, body unread, streamed there.
    scope.addHook('onRequest', async (request, reply) => {
      const { volumeID } = request.params as { volumeID?: string };
      if (typeof volumeID !== 'string') return;
      try {
        const access = await deps.access(volumeID, request.headers.authorization);
        if ('dir' in access) {
          dirs.set(request, access.dir);
          return;
        }
        reply.hijack();
        await access.forward(request.raw, reply.raw);
      } catch (error) {
        if (reply.sent) return;
        await answerError(error as Error, undefined, request, reply);
      }
    });

    /** Parses `path`, opens the volume root around `op`, and maps every failure. */
    const serve = async (request: ContentRequest, reply: FastifyReply, op: (root: DirHandle, path: VolumePath) => Promise<unknown>) => {
      let path: VolumePath | undefined;
      try {
        const dir = dirs.get(request);
        if (dir === undefined) throw new ContentError(500, 'volume content request not authorized');
        path = parseVolumePath(request.query.path);
        const root = await openVolumeRoot(dir);
        try {
          return await op(root, path);
        } finally {
          await root.close();
        }
      } catch (error) {
        return answerError(error as Error, path, request, reply);
      }
    };

    // Open to API keys: each request is authorized by the volume's bearer token (the scope's onRequest hook above).
    const routeOptions = { config: OPEN_ROUTE, schema: { params: Params } };

    scope.get<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/dir', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => reply.code(200).send(await listDirectory(root, path, parseDepth(request.query.depth)))),
    );

    scope.post<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/dir', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => reply.code(201).send(await makeDirectory(root, path, parseWriteQuery(request.query), owners))),
    );

    scope.get<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/path', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => reply.code(200).send(await statEntry(root, path))),
    );

    scope.patch<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/path', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => reply.code(200).send(await updateMetadata(root, path, parseMetadataBody(request.body)))),
    );

    scope.delete<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/path', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => {
        await removeEntry(root, path);
        return reply.code(204).send();
      }),
    );

    // Declared before the GET so fastify does not derive one that reads the whole file to discard it.
    scope.head<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/file', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => {
        const download = await openDownload(root, path);
        download.stream?.destroy();
        return reply.code(200).header('content-type', 'application/octet-stream').header('content-length', String(download.size)).send();
      }),
    );

    scope.get<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/file', routeOptions, (request, reply) =>
      serve(request, reply, async (root, path) => {
        const download = await openDownload(root, path);
        void reply.code(200).header('content-type', 'application/octet-stream').header('content-length', String(download.size));
        return reply.send(download.stream ?? '');
      }),
    );

    // The upload body is never parsed: whatever its content type, the handler streams the raw request.
    await scope.register(async (uploads) => {
      uploads.removeAllContentTypeParsers();
      uploads.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
      uploads.put<{ Params: { volumeID: string }; Querystring: Query }>('/volumecontent/:volumeID/file', routeOptions, (request, reply) =>
        serve(request, reply, async (root, path) => {
          const options = parseWriteQuery(request.query);
          const body = request.body instanceof Readable ? request.body : request.raw;
          return reply.code(201).send(await uploadFile(root, path, body, options, owners, deps.maxUploadBytes));
        }),
      );
    });
  });

  async function answerError(error: Error & { validation?: unknown; statusCode?: number }, path: VolumePath | undefined, request: FastifyRequest, reply: FastifyReply) {
    let known = fromFsError(error, path?.display ?? '');
    if (!known && error.validation) known = badRequest(`invalid request: ${error.message}`);
    if (!known && error.statusCode && error.statusCode >= 400 && error.statusCode < 500) known = new ContentError(error.statusCode, error.message);
    if (!known && request.raw.destroyed) {
      request.log.info({ err: error, url: request.url }, 'volume-content request abandoned by the client');
      known = new ContentError(400, 'request aborted');
    }
    if (!known) {
      deps.logger.error({ err: error, method: request.method, url: request.url }, 'volume-content request failed');
      known = new ContentError(500, `internal error: ${error.message}`);
    }
    if (reply.sent) return reply;
    // A body left unread (a refused upload) is not drained: the connection ends with the answer.
    if (!request.raw.complete) void reply.header('connection', 'close');
    return reply.code(known.status).header('content-type', 'application/json; charset=utf-8').send(contentErrorBody(known));
  }
}
