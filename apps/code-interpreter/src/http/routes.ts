import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { userInfo } from 'node:os';
import { isAbsolute } from 'node:path';
import type { Logger } from 'pino';
import type { ContextRegistry, ContextView } from '../contexts/context-registry.ts';
import { normaliseLanguage, SUPPORTED_LANGUAGES_TEXT, type Language } from '../contexts/languages.ts';
import { fetchGlobalEnvs } from '../envd/global-envs.ts';
import { INTERPRETER_ERROR_NAME } from '../kernels/kernel.ts';
import { ExecutionStream, type ExecutionStreamOptions } from '../protocol/execution-stream.ts';
import { badRequest, HttpError, notFound, sendError, sendJson, toHttpError } from './http-error.ts';
import { optionalEnvVars, optionalString, readJsonObject } from './request-body.ts';

export interface ServerDeps {
  contexts: ContextRegistry;
  logger: Logger;
  envdUrl: string;
  maxBodyBytes: number;
  stream: ExecutionStreamOptions;
}

/** The code-interpreter HTTP server: `/health`, `/execute`, `/contexts` (code-interpreter-wire.md). */
export function createCodeInterpreterServer(deps: ServerDeps): Server {
  const server = createServer((req, res) => {
    route(req, res, deps).catch((error: unknown) => {
      const httpError = toHttpError(error);
      if (httpError.status >= 500) deps.logger.error({ err: (error as Error)?.message, method: req.method, url: req.url }, 'request failed');
      sendError(res, httpError);
    });
  });
  // Executions may run for long; the response stream is kept alive by keepalive frames, not by timeouts.
  server.requestTimeout = 0;
  server.headersTimeout = 30_000;
  server.keepAliveTimeout = 5_000;
  return server;
}

async function route(req: IncomingMessage, res: ServerResponse, deps: ServerDeps): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  const method = req.method ?? 'GET';
  if (path === '/health') {
    if (method !== 'GET' && method !== 'HEAD') throw new HttpError(405, `${method} ${path} is not allowed: use GET`);
    return sendJson(res, 200, 'OK');
  }
  if (path === '/execute') {
    if (method !== 'POST') throw new HttpError(405, `${method} ${path} is not allowed: use POST`);
    return execute(req, res, deps);
  }
  if (path === '/contexts') {
    if (method === 'GET') return sendJson(res, 200, deps.contexts.list());
    if (method === 'POST') return createContext(req, res, deps);
    throw new HttpError(405, `${method} ${path} is not allowed: use GET or POST`);
  }
  const restart = /^\/contexts\/([^/]+)\/restart$/.exec(path);
  if (restart) {
    if (method !== 'POST') throw new HttpError(405, `${method} ${path} is not allowed: use POST`);
    const id = pathSegment(restart[1]);
    if (!(await deps.contexts.restart(id))) throw notFound(`context '${id}' does not exist`);
    return sendJson(res, 204, undefined);
  }
  const one = /^\/contexts\/([^/]+)$/.exec(path);
  if (one) {
    const id = pathSegment(one[1]);
    if (method === 'DELETE') {
      if (!(await deps.contexts.remove(id))) throw notFound(`context '${id}' does not exist`);
      return sendJson(res, 204, undefined);
    }
    if (method === 'GET') {
      const context = deps.contexts.get(id);
      if (!context) throw notFound(`context '${id}' does not exist`);
      return sendJson(res, 200, context);
    }
    throw new HttpError(405, `${method} ${path} is not allowed: use GET or DELETE`);
  }
  throw notFound(`no route ${method} ${path}: this is the code-interpreter server (/health, /execute, /contexts)`);
}

function languageOf(name: string): Language {
  const language = normaliseLanguage(name);
  if (!language) throw badRequest(`language '${name.slice(0, 100)}' is not supported: use one of ${SUPPORTED_LANGUAGES_TEXT}`);
  return language;
}

async function createContext(req: IncomingMessage, res: ServerResponse, deps: ServerDeps): Promise<void> {
  const body = await readJsonObject(req, deps.maxBodyBytes);
  const language = languageOf(optionalString(body, 'language') ?? 'python');
  const cwd = optionalString(body, 'cwd');
  if (cwd !== undefined) {
    if (!isAbsolute(cwd) || cwd.includes('\0')) throw badRequest(`'cwd' must be an absolute path, got '${cwd.slice(0, 200)}'`);
    const info = await stat(cwd).catch(() => undefined);
    if (!info?.isDirectory()) throw badRequest(`'cwd' ${cwd} is not a directory in the sandbox`);
    // The kernels run as the user this server runs as: a directory it cannot enter cannot be their cwd.
    const enterable = await access(cwd, constants.X_OK).then(() => true, () => false);
    if (!enterable) throw badRequest(`'cwd' ${cwd} cannot be entered by the sandbox user ${userInfo().username} (permission denied)`);
  }
  const context = await deps.contexts.create(language, cwd);
  sendJson(res, 200, context);
}

async function execute(req: IncomingMessage, res: ServerResponse, deps: ServerDeps): Promise<void> {
  const body = await readJsonObject(req, deps.maxBodyBytes);
  if (typeof body.code !== 'string') throw badRequest(`'code' is required and must be a string`);
  const code = body.code;
  const contextId = optionalString(body, 'context_id');
  const languageName = optionalString(body, 'language');
  const envVars = optionalEnvVars(body, 'env_vars');
  if (contextId !== undefined && languageName !== undefined) throw badRequest(`give 'context_id' or 'language', not both: a context has its language already`);

  let context: ContextView | undefined;
  let language: Language | undefined;
  if (contextId !== undefined) {
    context = deps.contexts.get(contextId);
    if (!context) throw notFound(`context '${contextId}' does not exist`);
  } else {
    language = languageOf(languageName ?? 'python');
  }

  const stream = new ExecutionStream(res, deps.stream);
  const aborted = new AbortController();
  let finished = false;
  res.on('close', () => {
    if (!finished) aborted.abort();
  });
  const token = headerValue(req, 'x-access-token');
  const sandboxId = headerValue(req, 'e2b-sandbox-id');
  const logger = sandboxId && /^[A-Za-z0-9_]{1,128}$/.test(sandboxId) ? deps.logger.child({ sandboxId }) : deps.logger;
  try {
    if (!context) {
      try {
        context = await deps.contexts.defaultFor(language!);
      } catch (error) {
        stream.error(INTERPRETER_ERROR_NAME, `the default ${language} context could not start: ${(error as Error).message}`, '');
        return;
      }
    }
    await deps.contexts.execute(context.id, code, envVars, () => fetchGlobalEnvs(deps.envdUrl, token, logger.child({ contextId: context!.id })), stream, aborted.signal);
    if (aborted.signal.aborted) logger.info({ contextId: context.id }, 'client went away: execution interrupted');
  } catch (error) {
    stream.error(INTERPRETER_ERROR_NAME, (error as Error).message, '');
  } finally {
    finished = true;
    stream.end();
  }
}

function pathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw badRequest(`'${raw.slice(0, 100)}' is not a valid URL path segment`);
  }
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
