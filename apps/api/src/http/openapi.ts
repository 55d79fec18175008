import type { FastifyInstance, FastifySchema } from 'fastify';
import { OPEN_ROUTE, type RouteAuth } from './route-auth.ts';

/** A route as the OpenAPI document describes it. */
interface DocumentedRoute {
  method: string;
  url: string;
  auth: RouteAuth;
  bearer: boolean;
  schema: FastifySchema | undefined;
}

type JsonSchema = Record<string, unknown> & { properties?: Record<string, unknown>; required?: string[] };

const ERROR_SCHEMA = {
  type: 'object',
  required: ['code', 'message'],
  properties: { code: { type: 'integer' }, message: { type: 'string' } },
};

/** `/sandboxes/:sandboxID` → `/sandboxes/{sandboxID}`; a wildcard tail is the parameter `path`. */
const openApiPath = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{path}');

/** Plain JSON of a schema (TypeBox marks its schemas with symbol keys, which are no part of the document). */
const plain = (schema: unknown): JsonSchema => JSON.parse(JSON.stringify(schema)) as JsonSchema;

function operationId(method: string, url: string, taken: Set<string>): string {
  const words = url
    .split('/')
    .filter(Boolean)
    .map((segment) => (segment.startsWith(':') ? `By-${segment.slice(1)}` : segment === '*' ? 'path' : segment))
    .flatMap((segment) => segment.split(/[^A-Za-z0-9]+/))
    .filter(Boolean)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1));
  const base = `${method.toLowerCase()}${words.join('')}`;
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}${n}`;
  taken.add(id);
  return id;
}

function parameters(route: DocumentedRoute): unknown[] {
  const result: unknown[] = [];
  const params = route.schema?.params ? plain(route.schema.params) : undefined;
  for (const name of openApiPath(route.url).match(/\{([^}]+)\}/g)?.map((p) => p.slice(1, -1)) ?? []) {
    result.push({ name, in: 'path', required: true, schema: params?.properties?.[name === 'path' ? '*' : name] ?? { type: 'string' } });
  }
  const query = route.schema?.querystring ? plain(route.schema.querystring) : undefined;
  for (const [name, schema] of Object.entries(query?.properties ?? {})) {
    result.push({ name, in: 'query', required: query?.required?.includes(name) ?? false, schema });
  }
  return result;
}

function security(route: DocumentedRoute): Array<Record<string, string[]>> {
  if (route.auth === 'open') return [];
  if (route.auth === 'admin') return [{ AdminKey: [] }, { AdminBearer: [] }];
  return route.bearer ? [{ ApiKey: [] }, { ApiKeyBearer: [] }] : [{ ApiKey: [] }];
}

/** The OpenAPI 3.1 document of `routes`: paths, parameters and bodies from the route schemas, security from their auth. */
export function openApiDocument(routes: readonly DocumentedRoute[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const taken = new Set<string>();
  for (const route of routes) {
    const body = route.schema?.body ? plain(route.schema.body) : undefined;
    const responses: Record<string, unknown> = {};
    for (const [status, schema] of Object.entries((route.schema?.response ?? {}) as Record<string, unknown>)) {
      responses[status] = { description: `answer ${status}`, content: { 'application/json': { schema: plain(schema) } } };
    }
    if (Object.keys(responses).length === 0) responses['2XX'] = { description: 'success' };
    responses.default = { description: 'an error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    const path = (paths[openApiPath(route.url)] ??= {});
    path[route.method.toLowerCase()] = {
      operationId: operationId(route.method, route.url, taken),
      parameters: parameters(route),
      ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
      responses,
      security: security(route),
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Tidepool API', version, description: 'The E2B-compatible REST API of a Tidepool platform.' },
    paths,
    components: {
      schemas: { Error: ERROR_SCHEMA },
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: "a team's API key" },
        ApiKeyBearer: { type: 'http', scheme: 'bearer', description: "a team's API key as a Bearer token (the CLI's /teams)" },
        AdminKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: "the platform's admin key" },
        AdminBearer: { type: 'http', scheme: 'bearer', description: "the platform's admin key as a Bearer token" },
      },
    },
  };
}

/**
 * Records the routes registered from now on and serves their OpenAPI document at `GET /openapi.json` (open: it
 * describes the API, it holds nothing of anyone's). Installed before any route.
 */
export function installOpenApi(app: FastifyInstance, version: string): void {
  const routes: DocumentedRoute[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      if (method === 'HEAD' || route.config?.auth === undefined) continue;
      routes.push({ method, url: route.url, auth: route.config.auth, bearer: route.config.bearer === true, schema: route.schema });
    }
  });
  let document: string | undefined;
  app.get('/openapi.json', { config: OPEN_ROUTE }, async (_request, reply) => {
    document ??= JSON.stringify(openApiDocument(routes, version));
    return reply.code(200).type('application/json; charset=utf-8').send(document);
  });
}
