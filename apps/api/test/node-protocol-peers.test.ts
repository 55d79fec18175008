/**
 * The API against node agents it must not trust blindly, over the real mutual-TLS listeners (certificates made by the
 * cluster kit with openssl; no engine, no root):
 *   - an agent one node protocol version older (it speaks only version 1, as every agent before `bootContainer` did:
 *     this build's NodeService restricted to version 1, the Hello such an agent answers) is refused at its Hello with
 *     a typed error naming what it speaks, logged as a refused node, and gets no row; a current agent beside it is
 *     taken in by the same round, and this build's agent still serves an API of version 1;
 *   - malformed Hello bodies sent to a real agent: typed Connect errors, and the agent goes on answering;
 *   - Hello answers that lie or break (another node's id, an impossible capacity, an oversized answer, a stream cut
 *     mid-answer, a version that was not offered): typed NodeChannelErrors, no row, the API process unharmed;
 *   - a runtime call (`bootContainer`) whose answer is cut mid-body, of the wrong shape, or an error: typed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as connectHttp2, constants as http2, createSecureServer, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import { createServer as createHttpsServer, request as httpsRequest, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { create } from '@bufbuild/protobuf';
import { type ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureClusterTls, ensureNodeServerTls, getFreePort } from '@tidepool/testkit';
import { CapacitySchema, NodeService } from '@tidepool/protocol/node';
import { createAgentServer, type AgentServer } from '../src/node-agent/agent-server.ts';
import { nodeServiceHandler } from '../src/node-agent/node-service.ts';
import { NodeChannelError } from '../src/nodes/node-channel-errors.ts';
import type { NodeTls } from '../src/nodes/node-channel-client.ts';
import { type DiscoveryOutcome, NodeDiscovery } from '../src/nodes/node-discovery.ts';
import { helloNode } from '../src/nodes/node-hello.ts';
import { NodeStore } from '../src/nodes/node-store.ts';
import { connectRemoteNode } from '../src/nodes/remote-node.ts';
import { DockerCallError } from '../src/runtime/docker/docker-call.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { SqliteDatabase } from '../src/store/sqlite-database.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-node-peers-'));
const silent = pino({ level: 'silent' });
let client: NodeTls;
let port: number;
let db: SqliteDatabase;
let store: NodeStore;
const closers: Array<() => Promise<void>> = [];

const capacity = async () => ({ cpuCount: 2, memoryMB: 4096, memoryAvailableMB: 3000, images: ['tidepool/base:latest'] });
const serverTls = (certName: string) => ({ ca: readFileSync(join(dir, 'ca.pem')), cert: readFileSync(join(dir, `${certName}.pem`)), key: readFileSync(join(dir, `${certName}-key.pem`)) });

async function listen(server: Http2SecureServer | HttpsServer, host: string, onPort = port): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(onPort, host, () => resolve());
  });
  return `https://${host}:${(server.address() as AddressInfo).port}`;
}

/** A real agent listener (its server, its NodeService) as `nodeId`, speaking `versions` (this build's by default). */
async function startAgent(options: { nodeId: string; certName: string; host: string; versions?: number[] }): Promise<{ url: string; agent: AgentServer }> {
  const protocol = nodeServiceHandler({ nodeId: options.nodeId, agentVersion: options.versions ? 'old' : 'current', capacity, startedAtMs: Date.now(), logger: silent, versions: options.versions });
  // Hello reads only the capacity: the runtime is never called by these cases.
  const agent = createAgentServer({ nodeId: options.nodeId, version: 'current', runtime: {} as SandboxRuntime, capacity, tls: serverTls(options.certName), logger: silent, protocol });
  const url = await listen(agent.server, options.host);
  closers.push(() => agent.close());
  return { url, agent };
}

/** A Connect server on the node's certificate answering Hello with whatever `hello` returns (or doing `raw` instead). */
async function startFakeHello(
  certName: string,
  host: string,
  hello: (offered: number[]) => Record<string, unknown>,
  raw?: (request: Http2ServerRequest, response: Http2ServerResponse) => boolean,
): Promise<string> {
  const routes = (router: ConnectRouter): void => {
    router.service(NodeService, { hello: async (request) => hello([...request.protocolVersions]) as never });
  };
  const handler = connectNodeAdapter({ routes });
  const server = createSecureServer({ ...serverTls(certName), requestCert: true, rejectUnauthorized: true }, (request, response) => {
    if (raw?.(request, response)) return;
    handler(request, response);
  });
  const sessions = new Set<import('node:http2').ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  const url = await listen(server, host);
  closers.push(async () => {
    for (const session of sessions) session.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return url;
}

/** A pino logger whose lines land in `lines`. */
function capturingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

const failure = (outcome: DiscoveryOutcome | undefined): NodeChannelError => {
  expect(outcome && 'error' in outcome, JSON.stringify(outcome)).toBe(true);
  const error = (outcome as { error: Error }).error;
  expect(error).toBeInstanceOf(NodeChannelError);
  return error as NodeChannelError;
};

async function channelError(promise: Promise<unknown>): Promise<NodeChannelError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(NodeChannelError);
  return error as NodeChannelError;
}

/** One raw HTTP/2 request with the API's client certificate: status and body text. */
function rawHttp2(url: string, path: string, headers: Record<string, string>, body: Buffer | string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const session = connectHttp2(url, { ca: client.ca, cert: client.cert, key: client.key, checkServerIdentity: () => undefined });
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': path, ...headers });
    let status = 0;
    let text = '';
    stream.on('response', (head) => (status = Number(head[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('error', () => undefined);
    // The answer's end, not the stream's close: an agent that refused a body may stop reading it (flow control then
    // holds the rest of ours), which ends nothing but that stream.
    const done = (): void => {
      session.destroy();
      resolve({ status, body: text });
    };
    stream.once('end', done);
    stream.once('close', done);
    stream.end(body);
  });
}

/** One HTTP/1.1 runtime call with the API's client certificate: status and body text (0 when the connection broke). */
function rawCall(url: string, method: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const target = new URL(`/v1/runtime/${method}`, url);
    const req = httpsRequest(
      { hostname: target.hostname, port: target.port, path: target.pathname, method: 'POST', ca: client.ca, cert: client.cert, key: client.key, agent: false, checkServerIdentity: () => undefined, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.once('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.once('error', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.once('error', (error) => resolve({ status: 0, body: error.message }));
    req.end(body);
  });
}

beforeAll(async () => {
  const tls = await ensureClusterTls(dir);
  client = { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) };
  await ensureNodeServerTls(dir, 'node-a', '127.0.0.2');
  await ensureNodeServerTls(dir, 'node-b', '127.0.0.3');
  port = await getFreePort();
  db = SqliteDatabase.open(join(dir, 'data'));
  store = new NodeStore(db);
}, 120_000);

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('an agent one node protocol version older', () => {
  it('is refused at its Hello (typed, naming what it speaks, logged once as a refused node, no row) while a current agent beside it is taken in', async () => {
    const old = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2', versions: [1] });
    const current = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.3' });
    const { logger, lines } = capturingLogger();
    const discovery = new NodeDiscovery({ entries: [old.url, current.url], tls: client, store, lostAfterMs: 30_000, helloDeadlineMs: 5_000, logger });
    const outcomes = await discovery.roundNow();
    const refused = failure(outcomes.find((o) => o.url === old.url));
    expect(refused.code).toBe('version');
    expect(refused.message).toMatch(/this node speaks node protocol versions 1; the API offered 2 \(the node speaks 1\)/);
    expect(outcomes.find((o) => o.url === current.url)).toEqual({ url: current.url, nodeId: 'node-b' });
    expect(await store.get('node-a')).toBeUndefined();
    expect(await store.get('node-b')).toMatchObject({ url: current.url, status: 'ready' });
    // The operator sees why, once (the next rounds refuse it the same way without repeating the line).
    await discovery.roundNow();
    const refusals = lines.filter((line) => line.msg === 'node refused' && line.url === old.url);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ level: 50, code: 'version' });
    expect(String(refusals[0]!.problem)).toContain('the node speaks 1');
  });

  it('a node row left by that agent before it was downgraded is not refreshed by its Hello: it ages into lost, nothing else happens', async () => {
    const old = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.4', versions: [1] });
    await store.register({ nodeId: 'node-a', url: old.url, version: 'current', capacity: await capacity() });
    const before = (await store.get('node-a'))!;
    await new Promise((r) => setTimeout(r, 20));
    const discovery = new NodeDiscovery({ entries: [old.url], tls: client, store, lostAfterMs: 30_000, helloDeadlineMs: 5_000, logger: silent });
    expect(failure((await discovery.roundNow())[0]).code).toBe('version');
    const after = (await store.get('node-a'))!;
    expect(after.lastHeartbeat).toBe(before.lastHeartbeat);
    expect(after.version).toBe('current');
    expect(await store.markLost(0)).toContain('node-a');
    await db.run('DELETE FROM nodes');
  });

  it('an agent that ignores the offer and answers version 1 anyway is refused too (typed, no row)', async () => {
    const url = await startFakeHello('node-a-server', '127.0.0.5', () => ({ protocolVersion: 1, nodeId: 'node-a', agentVersion: 'old', capacity: create(CapacitySchema, { cpuCount: 2, memoryMb: 1024n, memoryAvailableMb: 512n }), startedAtMs: 1n }));
    const error = await channelError(helloNode({ url, tls: client, deadlineMs: 5_000 }));
    expect(error.code).toBe('version');
    expect(error.message).toContain('the node picked protocol version 1, which was not offered');
    expect(failure((await new NodeDiscovery({ entries: [url], tls: client, store, lostAfterMs: 30_000, helloDeadlineMs: 5_000, logger: silent }).roundNow())[0]).code).toBe('version');
    expect(await store.get('node-a')).toBeUndefined();
  });

  it('this build\'s agent still serves an API one version older (it speaks 2 and 1)', async () => {
    const current = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.6' });
    expect((await helloNode({ url: current.url, tls: client, deadlineMs: 5_000, versions: [1] })).protocolVersion).toBe(1);
    expect((await helloNode({ url: current.url, tls: client, deadlineMs: 5_000 })).protocolVersion).toBe(2);
  });
});

describe('malformed Hello bodies sent to a real agent', () => {
  it('answers each with a typed Connect error and goes on answering Hellos', async () => {
    const { url } = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.7' });
    const path = `/${NodeService.typeName}/Hello`;
    const json = { 'content-type': 'application/json' };
    const cases: Array<[string, Record<string, string>, Buffer | string, number, string]> = [
      ['not JSON', json, '{"protocolVersions": [2', 400, 'invalid_argument'],
      ['a field of the wrong type', json, '{"protocolVersions": "two"}', 400, 'invalid_argument'],
      ['no versions', json, '{}', 400, 'invalid_argument'],
      ['33 versions', json, JSON.stringify({ protocolVersions: Array.from({ length: 33 }, (_, i) => i + 1) }), 400, 'invalid_argument'],
      ['a version out of range', json, '{"protocolVersions": [-1]}', 400, 'invalid_argument'],
      // (Connect itself reports a binary message it cannot parse as `internal`, before the service sees it)
      ['binary garbage', { 'content-type': 'application/proto' }, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), 500, 'internal'],
      ['over the agent\'s 1 MiB', json, JSON.stringify({ protocolVersions: [2], apiVersion: 'x'.repeat(2 * 1024 * 1024) }), 429, 'resource_exhausted'],
    ];
    for (const [what, headers, body, status, code] of cases) {
      const answer = await rawHttp2(url, path, headers, body);
      expect(answer.status, `${what}: ${answer.body}`).toBe(status);
      expect((JSON.parse(answer.body) as { code: string }).code, what).toBe(code);
    }
    // a field this agent does not know is skipped (a newer API's addition), not taken for anything
    expect((await rawHttp2(url, path, json, '{"protocolVersions": [2], "nodeId": "node-a"}')).body).toContain('"nodeId":"node-b"');
    // a content type the protocol does not speak
    expect((await rawHttp2(url, path, { 'content-type': 'text/plain' }, 'hello')).status).toBe(415);
    // after all that, a well-formed Hello
    expect((await helloNode({ url, tls: client, deadlineMs: 5_000 })).nodeId).toBe('node-b');
  });
});

describe('oversized runtime calls sent to a real agent', () => {
  it('a body over the call\'s limit is a typed 413 before anything runs (bootContainer may carry a sandbox\'s whole environment, 8 MiB)', async () => {
    const { url } = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.8' });
    const big = (bytes: number) => JSON.stringify({ args: ['x'.repeat(bytes)] });
    for (const [method, bytes] of [['pause', 2 * 1024 * 1024], ['bootContainer', 9 * 1024 * 1024]] as const) {
      const answer = await rawCall(url, method, big(bytes));
      expect(answer.status, method).toBe(413);
      expect(JSON.parse(answer.body)).toEqual({ error: { code: 'bad_call', message: expect.stringMatching(new RegExp(`^${method}: request body over \\d+ bytes$`)) as unknown } });
    }
    // 2 MiB is within bootContainer's limit: read, then refused by the call table (a string is no spec)
    const within = await rawCall(url, 'bootContainer', big(2 * 1024 * 1024));
    expect(within.status).toBe(400);
    expect(JSON.parse(within.body).error.message).toMatch(/^bootContainer: invalid arguments/);
    expect((await helloNode({ url, tls: client, deadlineMs: 5_000 })).nodeId).toBe('node-b');
  });
});

describe('Hello answers that lie or break', () => {
  const good = (offered: number[]) => ({ protocolVersion: offered[0], nodeId: 'node-a', agentVersion: 'x', capacity: create(CapacitySchema, { cpuCount: 2, memoryMb: 1024n, memoryAvailableMb: 512n }), startedAtMs: 1n });

  it('each is a typed error and writes no row; the API is unharmed', async () => {
    const cases: Array<[string, Parameters<typeof startFakeHello>[2], Parameters<typeof startFakeHello>[3], NodeChannelError['code'], RegExp]> = [
      ['another node\'s id (its certificate names node-a)', (o) => ({ ...good(o), nodeId: 'node-b' }), undefined, 'identity', /claims id "node-b" but its certificate names/],
      ['not a node id', (o) => ({ ...good(o), nodeId: '../../etc' }), undefined, 'protocol', /answered a node id that is not one/],
      ['no capacity', (o) => ({ ...good(o), capacity: undefined }), undefined, 'protocol', /answered no capacity/],
      ['no agent version', (o) => ({ ...good(o), agentVersion: '' }), undefined, 'protocol', /no usable agent version/],
      ['an answer over the API\'s 4 MiB', (o) => ({ ...good(o), capacity: create(CapacitySchema, { cpuCount: 1, images: Array.from({ length: 50_000 }, (_, i) => `tidepool/fake-${i}:${'t'.repeat(80)}`) }) }), undefined, 'protocol', /Hello to https/],
      [
        'a stream cut mid-answer',
        good,
        (_request, response) => {
          response.stream.respond({ ':status': 200, 'content-type': 'application/json' });
          response.stream.write('{"protocolVersion": 2, "nodeId": "no');
          response.stream.close(http2.NGHTTP2_INTERNAL_ERROR);
          return true;
        },
        'unreachable',
        /Hello to https/,
      ],
      ['no answer at all', good, () => true, 'deadline', /Hello to https/],
    ];
    let host = 10;
    for (const [what, hello, raw, code, message] of cases) {
      const url = await startFakeHello('node-a-server', `127.0.1.${host++}`, hello, raw);
      const deadlineMs = code === 'deadline' ? 1_500 : 10_000;
      const error = await channelError(helloNode({ url, tls: client, deadlineMs }));
      expect(error.code, what).toBe(code);
      expect(error.message, what).toMatch(message);
      expect(failure((await new NodeDiscovery({ entries: [url], tls: client, store, lostAfterMs: 30_000, helloDeadlineMs: deadlineMs, logger: silent }).roundNow())[0]).code, what).toBe(code);
    }
    expect(await store.list()).toEqual([]);
  });

  it('a capacity no machine has (memory beyond what a number holds exactly) is refused by the store: protocol, no row', async () => {
    const url = await startFakeHello('node-a-server', '127.0.1.40', (o) => ({ ...good(o), capacity: create(CapacitySchema, { cpuCount: 2, memoryMb: 1n << 60n, memoryAvailableMb: 1n }) }));
    const error = failure((await new NodeDiscovery({ entries: [url], tls: client, store, lostAfterMs: 30_000, helloDeadlineMs: 5_000, logger: silent }).roundNow())[0]);
    expect(error.code).toBe('protocol');
    expect(error.message).toMatch(/reported an invalid capacity: capacity.memoryMB/);
    expect(await store.get('node-a')).toBeUndefined();
  });
});

describe('a bootContainer call whose answer breaks', () => {
  let server: HttpsServer;
  let reply: (body: string) => { status: number; body: string } | 'cut' = () => ({ status: 200, body: '{}' });
  const spec = { sandboxId: 'isb_peer', templateId: 'base', image: 'tidepool/base:latest', cpuCount: 1, memoryMB: 256, envdAccessToken: 'tok_peer' };
  const init = { envVars: { A: '1' }, defaultUser: 'user', defaultWorkdir: '' };

  beforeAll(async () => {
    server = createHttpsServer({ ...serverTls('node-a-server'), requestCert: true, rejectUnauthorized: true }, (request, response) => {
      let body = '';
      request.setEncoding('utf8');
      request.on('data', (chunk: string) => (body += chunk));
      request.once('end', () => {
        const answer = reply(body);
        if (answer === 'cut') {
          response.writeHead(200, { 'content-type': 'application/json', 'content-length': '500' });
          response.write('{"result": {"containerId": "');
          setImmediate(() => response.socket?.destroy());
          return;
        }
        response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
      });
    });
    await listen(server, '127.0.1.50', 0);
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
  });

  it('cut mid-answer, the wrong shape, an error: each typed, and the call sent only the table\'s fields', async () => {
    const node = connectRemoteNode({ nodeId: 'node-a', url: `https://127.0.1.50:${(server.address() as AddressInfo).port}`, tls: client, deadlines: { default: 2_000 } });
    try {
      let sent: unknown;
      reply = (body) => {
        sent = JSON.parse(body);
        return 'cut';
      };
      const cut = await channelError(node.runtime.bootContainer(spec, { ...init, extra: 'not on the wire' } as typeof init));
      expect(cut.code).toBe('unreachable');
      expect(cut.message).toMatch(/^node node-a: bootContainer: /);
      expect(sent).toEqual({ args: [spec, init] });
      reply = () => ({ status: 200, body: JSON.stringify({ result: { containerId: 'c'.repeat(64), address: '10.0.0.5' } }) });
      expect((await channelError(node.runtime.bootContainer(spec, init))).message).toMatch(/bootContainer: answered a result of the wrong shape/);
      reply = () => ({ status: 200, body: JSON.stringify({ result: { containerId: 'c'.repeat(64), address: '10.0.0.5', envdVersion: 'v'.repeat(65) } }) });
      expect((await channelError(node.runtime.bootContainer(spec, init))).code).toBe('protocol');
      reply = () => ({ status: 500, body: JSON.stringify({ error: { code: 'engine', message: 'envd did not answer within 30000 ms' } }) });
      const failed = await node.runtime.bootContainer(spec, init).then(() => undefined, (e: unknown) => e);
      expect(failed).toBeInstanceOf(DockerCallError);
      expect((failed as Error).message).toContain('envd did not answer');
      reply = () => ({ status: 200, body: JSON.stringify({ result: { containerId: 'c'.repeat(64), address: '10.0.0.5', envdVersion: '0.6.14' } }) });
      expect(await node.runtime.bootContainer(spec, init)).toEqual({ containerId: 'c'.repeat(64), address: '10.0.0.5', envdVersion: '0.6.14' });
    } finally {
      node.close();
    }
  });
});
