import type { EnvdInitBody } from '@tidepool/protocol/envd';
import type { FastifyInstance } from 'fastify';
import { ENVD_VERSION } from '../config.ts';
import type { EnvdContext } from '../context.ts';
import { warmProcessPath } from '../process/process-warmup.ts';
import { tokensEqual } from './access-token-guard.ts';
import { EnvdHttpError } from './http-error.ts';

type InitBody = EnvdInitBody;

function parseInitBody(raw: unknown): InitBody {
  if (raw === undefined || raw === null || raw === '') return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new EnvdHttpError(400, 'init body must be a JSON object');
  const body = raw as Record<string, unknown>;
  const text = (key: string): string | undefined => {
    const value = body[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string') throw new EnvdHttpError(400, `${key} must be a string`);
    return value;
  };
  let envVars: Record<string, string> | undefined;
  if (body.envVars !== undefined && body.envVars !== null) {
    if (typeof body.envVars !== 'object' || Array.isArray(body.envVars)) throw new EnvdHttpError(400, 'envVars must be an object of strings');
    envVars = {};
    for (const [key, value] of Object.entries(body.envVars as Record<string, unknown>)) {
      if (typeof value !== 'string') throw new EnvdHttpError(400, `envVars.${key} must be a string`);
      envVars[key] = value;
    }
  }
  return { envVars, accessToken: text('accessToken'), timestamp: text('timestamp'), defaultUser: text('defaultUser'), defaultWorkdir: text('defaultWorkdir') };
}

/** How far ahead of envd's clock an `/init` timestamp may be (the platform and the sandbox share the host clock). */
export const INIT_CLOCK_SKEW_MS = 10_000;

/**
 * `POST /init`: the control plane hands over env vars and defaults. The access token reaches envd at
 * birth (birth-token.ts), so `/init` always needs it: header `X-Access-Token` or body `accessToken`,
 * and a body token must equal the current one. Only in debug mode, while no token is set, may the
 * first `/init` set it. Timestamps later than now (plus a small skew) are refused: a far-future one
 * would make every later `/init` look stale.
 */
export function registerInitRoute(app: FastifyInstance, ctx: EnvdContext): void {
  // Every field is optional, so an empty JSON body is a valid /init (fastify's own parser refuses it).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 1024 * 1024 }, (_request, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(new EnvdHttpError(400, `invalid JSON body: ${(error as Error).message}`), undefined);
    }
  });
  app.post('/init', async (request, reply) => {
    const body = parseInitBody(request.body);
    const state = ctx.state;
    if (state.accessToken) {
      const header = request.headers['x-access-token'];
      const presented = typeof header === 'string' && header !== '' ? header : body.accessToken;
      if (!presented) throw new EnvdHttpError(401, 'access token reset not authorized');
      if (!tokensEqual(presented, state.accessToken) || (body.accessToken !== undefined && !tokensEqual(body.accessToken, state.accessToken))) {
        throw new EnvdHttpError(401, 'access token validation failed');
      }
    } else if (body.accessToken && !state.initMaySetToken) {
      throw new EnvdHttpError(401, 'access token reset not authorized');
    }
    const now = Date.now();
    const at = body.timestamp ? Date.parse(body.timestamp) : now;
    if (Number.isNaN(at)) throw new EnvdHttpError(400, `timestamp '${body.timestamp}' is not an RFC 3339 date`);
    if (at > now + INIT_CLOCK_SKEW_MS) {
      throw new EnvdHttpError(400, `timestamp '${body.timestamp}' is in the future (more than ${INIT_CLOCK_SKEW_MS / 1000} s ahead of the sandbox clock ${new Date(now).toISOString()})`);
    }
    if (body.defaultUser !== undefined && !ctx.users.lookup(body.defaultUser)) throw new EnvdHttpError(400, `default user '${body.defaultUser}' does not exist`);
    if (at >= state.lastInitAt) {
      state.lastInitAt = at;
      if (body.accessToken && !state.accessToken) {
        state.accessToken = body.accessToken;
        state.initMaySetToken = false;
      }
      if (body.envVars) state.envVars = body.envVars;
      if (body.defaultUser) state.defaultUser = body.defaultUser;
      if (body.defaultWorkdir !== undefined) state.defaultWorkdir = body.defaultWorkdir || undefined;
      ctx.logger.info({ defaultUser: state.defaultUser, envVars: Object.keys(state.envVars).length }, 'initialised by the control plane');
    }
    // Once answered, envd is about to get its first command: warm its path while the platform returns.
    reply.raw.once('finish', () => setImmediate(() => warmProcessPath(ctx)));
    return reply.code(204).header('x-envd-version', ENVD_VERSION).header('cache-control', 'no-store').send();
  });
}
