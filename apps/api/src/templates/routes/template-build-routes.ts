import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalid, notFound, PlatformError } from '../../errors.ts';
import { parseLimit } from '../../http/keyset-page.ts';
import { callerTeam } from '../../http/request-team.ts';
import { BUILTIN_TEMPLATE_NAMES, type TemplateAccess } from '../template-catalog.ts';
import { parseBuildRequest } from '../build-request.ts';
import { checkFilesHash } from '../context-files.ts';
import type { BuildLogEntry, LogLevel, TemplateRecord } from '../template-model.ts';
import { checkBuildId } from '../template-names.ts';
import { buildStatusView } from '../template-views.ts';
import { signUpload, uploadSignatureValid } from '../upload-signature.ts';
import type { TemplateRouteDeps } from './template-route-deps.ts';
import { BuildParams, BuildStartBody, FileParams, LogsQuery, StatusQuery } from './template-schemas.ts';
import { OPEN_ROUTE, TEAM_ROUTE } from '../../http/route-auth.ts';

const LEVELS: LogLevel[] = ['debug', 'info', 'warn', 'error'];
const atLeast = (min: LogLevel | undefined) => (entry: BuildLogEntry) => min === undefined || LEVELS.indexOf(entry.level) >= LEVELS.indexOf(min);

/** Path of the PUT that receives a context archive (no API key: the URL is signed). */
export const uploadPath = (templateId: string, hash: string): string => `/templates/${encodeURIComponent(templateId)}/files/${hash}/upload`;

function origin(request: FastifyRequest): string {
  return `${request.protocol}://${request.headers.host ?? request.hostname}`;
}

/** The team whose context store a template's uploads go to (built-in templates take none). */
function ownerOf(template: TemplateRecord): string {
  if (template.teamId === null) throw invalid(`the built-in template '${template.alias ?? template.templateId}' takes no uploads`);
  return template.teamId;
}

/** Starting builds, uploading their files, and following them (status, logs). */
export function registerTemplateBuildRoutes(app: FastifyInstance, deps: TemplateRouteDeps): void {
  const { catalog, store } = deps;

  /** The build of a template the caller's team may access so; unknown (or another team's) template or build → not found. */
  const buildOf = async (request: FastifyRequest, access: TemplateAccess) => {
    const params = request.params as Static<typeof BuildParams>;
    // A built-in template's one build has the template's id (its image build's log is read here too).
    const buildId = BUILTIN_TEMPLATE_NAMES.includes(params.buildID) ? params.buildID : checkBuildId(params.buildID);
    return catalog.requireBuild((await catalog.require(params.templateID, callerTeam(request), access)).templateId, buildId);
  };

  /** The status poll answers an unknown build with 400, as the reference does (its other routes say 404). */
  const polledBuildOf = async (request: FastifyRequest) => {
    const params = request.params as Static<typeof BuildParams>;
    try {
      return await buildOf(request, 'read');
    } catch (error) {
      if (error instanceof PlatformError && error.kind === 'not_found' && (await catalog.find(params.templateID, callerTeam(request)))) throw invalid(`Build '${params.buildID}' not found`);
      throw error;
    }
  };

  app.post('/v2/templates/:templateID/builds/:buildID', { config: TEAM_ROUTE, schema: { params: BuildParams, body: BuildStartBody } }, async (request, reply) => {
    const build = await buildOf(request, 'write');
    await deps.queue.start(build.templateId, build.buildId, parseBuildRequest(request.body as Static<typeof BuildStartBody>));
    // No body: the SDK parses any other 2xx body as JSON.
    return reply.code(202).header('content-length', '0').send();
  });

  app.get('/templates/:templateID/builds/:buildID/status', { config: TEAM_ROUTE, schema: { params: BuildParams, querystring: StatusQuery } }, async (request) => {
    const build = await polledBuildOf(request);
    const query = request.query as Static<typeof StatusQuery>;
    const limit = parseLimit(query.limit);
    const offset = Number(query.logsOffset ?? 0);
    const entries = (await store.logs(build.buildId, offset, limit)).filter(atLeast(query.level as LogLevel | undefined));
    const failedStep = build.reason?.step;
    const reasonEntries =
      build.status === 'error' ? (await store.logs(build.buildId, 0, 100_000)).filter((e) => atLeast('warn')(e) && (failedStep === undefined || e.step === failedStep)) : [];
    return buildStatusView(build, entries, reasonEntries);
  });

  app.get('/templates/:templateID/builds/:buildID/logs', { config: TEAM_ROUTE, schema: { params: BuildParams, querystring: LogsQuery } }, async (request) => {
    const build = await buildOf(request, 'read');
    const query = request.query as Static<typeof LogsQuery>;
    const limit = parseLimit(query.limit);
    const forward = query.direction !== 'backward';
    const cursor = query.cursor === undefined ? undefined : Number(query.cursor);
    let entries = (await store.logs(build.buildId, 0, 100_000)).filter(atLeast(query.level as LogLevel | undefined));
    if (cursor !== undefined) entries = entries.filter((e) => (forward ? Date.parse(e.timestamp) >= cursor : Date.parse(e.timestamp) <= cursor));
    if (!forward) entries.reverse();
    return { logs: entries.slice(0, limit) };
  });

  app.get('/templates/:templateID/files/:hash', { config: TEAM_ROUTE, schema: { params: FileParams } }, async (request, reply) => {
    const params = request.params as Static<typeof FileParams>;
    const template = await catalog.require(params.templateID, callerTeam(request), 'write');
    const hash = checkFilesHash(params.hash);
    const owner = ownerOf(template);
    const present = deps.contextFiles.pathOf(owner, hash) !== undefined;
    if (present) await store.addContextFile(hash, template.templateId, deps.contextFiles.sizeOf(owner, hash));
    const { expires, signature } = signUpload(deps.signingSeed, template.templateId, hash);
    const url = `${origin(request)}${uploadPath(template.templateId, hash)}?expires=${expires}&signature=${signature}`;
    return reply.code(201).send({ present, url });
  });

  // The upload: raw bytes (tar or tar.gz) with an exact Content-Length, streamed to disk.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    scope.put('/templates/:templateID/files/:hash/upload', { config: OPEN_ROUTE, schema: { params: FileParams } }, async (request, reply) => {
      const params = request.params as Static<typeof FileParams>;
      const query = request.query as { expires?: string; signature?: string };
      const hash = checkFilesHash(params.hash);
      if (!uploadSignatureValid(deps.signingSeed, params.templateID, hash, query.expires, query.signature)) {
        return reply.code(403).send({ code: 403, message: 'the upload URL is invalid or has expired; ask for a new one' });
      }
      // The signature names the template (made for its team's key): the upload needs no key of its own.
      const template = await catalog.findAnyTeam(params.templateID);
      if (!template) throw notFound(`template '${params.templateID}' not found`);
      const length = request.headers['content-length'] === undefined ? undefined : Number(request.headers['content-length']);
      const size = await deps.contextFiles.receive(ownerOf(template), hash, request.raw, Number.isFinite(length) ? length : undefined);
      await store.addContextFile(hash, template.templateId, size);
      return reply.code(201).header('content-length', '0').send();
    });
  });
}
