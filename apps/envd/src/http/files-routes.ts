import type { FastifyInstance } from 'fastify';
import type { EnvdContext } from '../context.ts';
import type { WatchBarrier } from '../filesystem/watch-barrier.ts';
import { composeFiles } from './file-compose.ts';
import { downloadFile } from './file-download.ts';
import { EnvdHttpError } from './http-error.ts';
import { uploadFiles } from './file-upload.ts';

/** `GET`/`HEAD /files`, `POST /files` and `POST /files/compose`. */
export function registerFileRoutes(app: FastifyInstance, ctx: EnvdContext, watches: WatchBarrier): void {
  // Upload bodies are streamed by the handler itself, never buffered by fastify (scoped to this plugin).
  app.addContentTypeParser(['multipart/form-data', 'application/octet-stream'], (_request, _payload, done) => done(null));
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // A parameter given twice arrives as an array; the handlers expect one string each.
  app.addHook('preHandler', async (request) => {
    for (const [name, value] of Object.entries((request.query ?? {}) as Record<string, unknown>)) {
      if (typeof value !== 'string') throw new EnvdHttpError(400, `query parameter '${name}' must be given once`);
    }
  });
  // HEAD is handled by the download itself: fastify's automatic HEAD route would read the whole file.
  app.route({ method: ['GET', 'HEAD'], url: '/files', exposeHeadRoute: false, handler: (request, reply) => downloadFile(ctx, request, reply) });
  // A write is answered once directory watches have its events (see watch-barrier.ts).
  app.post('/files', (request, reply) => uploadFiles(ctx, request, reply, watches));
  app.post('/files/compose', (request, reply) => composeFiles(ctx, request, reply, watches));
}
