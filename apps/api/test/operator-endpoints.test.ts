/**
 * What an operator reads off a running platform: the OpenAPI document of every route (`GET /openapi.json`, valid
 * OpenAPI 3.1, open), readiness (`GET /ready`: the database and the nodes), and one access-log line per REST request
 * with the request id, which a caller may give as `x-request-id` (echoed) or is made anew (a malformed one is never
 * echoed).
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPlatformLogger } from '../src/observability/platform-logger.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const logLines: string[] = [];
const logger = createPlatformLogger('info', { write: (line: string) => void logLines.push(line) });
let platform: TestPlatform;

beforeAll(async () => {
  platform = await startTestPlatform({ logLevel: 'info' }, undefined, { logger });
});
afterAll(async () => {
  await platform?.dispose();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document, served without a key', async () => {
    const response = await fetch(`${platform.url}/openapi.json`);
    expect(response.status).toBe(200);
    const document = await response.json();
    expect(document.openapi).toBe('3.1.0');
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('describes every route of the server with its parameters, body and who may call it', async () => {
    const document = (await (await fetch(`${platform.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, any>> };
    const missing: string[] = [];
    for (const route of platform.app.routeTable) {
      const operation = document.paths[route.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, '{path}')]?.[route.method.toLowerCase()];
      if (!operation) {
        missing.push(`${route.method} ${route.url}`);
        continue;
      }
      const schemes = (operation.security as Array<Record<string, unknown>>).flatMap((s) => Object.keys(s));
      expect({ route: `${route.method} ${route.url}`, schemes }).toEqual({
        route: `${route.method} ${route.url}`,
        schemes: route.auth === 'open' ? [] : route.auth === 'admin' ? ['AdminKey', 'AdminBearer'] : route.url === '/teams' ? ['ApiKey', 'ApiKeyBearer'] : ['ApiKey'],
      });
    }
    expect(missing).toEqual([]);
    const create = document.paths['/sandboxes']!.post;
    expect(create.requestBody.content['application/json'].schema.properties.templateID).toMatchObject({ type: 'string' });
    const kill = document.paths['/sandboxes/{sandboxID}']!.delete;
    expect(kill.parameters).toEqual([expect.objectContaining({ name: 'sandboxID', in: 'path', required: true })]);
    const list = document.paths['/v2/sandboxes']!.get;
    expect(list.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual(expect.arrayContaining(['query:limit', 'query:nextToken']));
  });
});

describe('GET /ready', () => {
  it('is ready with the database and a ready node; not ready (503, the error shape) while no node takes sandboxes', async () => {
    const ready = await fetch(`${platform.url}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', database: 'ok', nodes: { ready: 1, total: 1 } });
    const nodes = await api(platform, 'GET', '/nodes', undefined, platform.adminKey);
    const nodeID = nodes.body[0].nodeID as string;
    expect((await api(platform, 'POST', `/nodes/${nodeID}`, { status: 'draining' }, platform.adminKey)).status).toBe(204);
    try {
      const draining = await fetch(`${platform.url}/ready`);
      expect(draining.status).toBe(503);
      expect(await draining.json()).toEqual({ code: 503, message: 'not ready: no node takes sandboxes', database: 'ok', nodes: { ready: 0, total: 1 } });
    } finally {
      expect((await api(platform, 'POST', `/nodes/${nodeID}`, { status: 'ready' }, platform.adminKey)).status).toBe(204);
    }
    expect((await fetch(`${platform.url}/ready`)).status).toBe(200);
  });
});

describe('request ids and the access log', () => {
  it("echoes a well-formed x-request-id and logs one line per request with it, the route, the status and the team", async () => {
    const id = `op-test-${Date.now()}`;
    const response = await fetch(`${platform.url}/v2/sandboxes?limit=1`, { headers: { 'x-api-key': platform.apiKey, 'x-request-id': id } });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBe(id);
    await expect.poll(() => logLines.filter((line) => line.includes(id)).length).toBe(1);
    const line = JSON.parse(logLines.find((l) => l.includes(id))!);
    expect(line).toMatchObject({ msg: 'request completed', reqId: id, method: 'GET', route: '/v2/sandboxes', status: 200, teamId: platform.defaultTeamId });
    expect(typeof line.durationMs).toBe('number');
  });

  it('replaces a malformed x-request-id with a new one and never echoes or logs it', async () => {
    const bad = 'bad id <script>';
    const response = await fetch(`${platform.url}/nowhere`, { headers: { 'x-api-key': platform.apiKey, 'x-request-id': bad } });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ code: 404, message: expect.any(String) });
    const id = response.headers.get('x-request-id')!;
    expect(id).toMatch(UUID);
    await expect.poll(() => logLines.some((line) => line.includes(id) && line.includes('"request completed"'))).toBe(true);
    expect(logLines.some((line) => line.includes(bad))).toBe(false);
    const refused = await fetch(`${platform.url}/v2/sandboxes`);
    expect(refused.status).toBe(401);
    expect(refused.headers.get('x-request-id')).toMatch(UUID);
  });
});
