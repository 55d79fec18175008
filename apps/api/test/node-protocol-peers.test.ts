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
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
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
