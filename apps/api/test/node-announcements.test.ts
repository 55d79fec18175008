/**
 * Nodes hold no cluster secrets: the API finds node agents (TIDEPOOL_NODES), says the node protocol's Hello to each
 * address over mutual TLS and writes the node table itself, binding each node id to the certificate its agent
 * presented. Real agent listeners (the agent's server and its NodeService, certificates made by the cluster kit
 * with openssl) and a real PostgreSQL whose platform role is no superuser.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureClusterTls, ensureNodeServerTls, getFreePort, type PostgresServer, startPostgres } from '@tidepool/testkit';
import { createAgentServer, type AgentServer } from '../src/node-agent/agent-server.ts';
import { nodeServiceHandler } from '../src/node-agent/node-service.ts';
import { runNodeAgent } from '../src/node-command.ts';
import { NodeChannelError } from '../src/nodes/node-channel-errors.ts';
import type { NodeTls } from '../src/nodes/node-channel-client.ts';
import { type DiscoveryOutcome, NodeDiscovery } from '../src/nodes/node-discovery.ts';
import { helloNode } from '../src/nodes/node-hello.ts';
import { NodeStore } from '../src/nodes/node-store.ts';
import { connectRemoteNode } from '../src/nodes/remote-node.ts';
import type { NodeCapacity } from '../src/nodes/sandbox-node.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { PostgresDatabase } from '../src/store/postgres-database.ts';

const logger = pino({ level: 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'tp-node-hello-'));
let server: PostgresServer;
let db: PostgresDatabase;
let store: NodeStore;
let client: NodeTls;
let port: number;
const agents: AgentServer[] = [];

interface Agent {
  server: AgentServer;
  url: string;
  stop(): Promise<void>;
}

/** A node agent's listener on `host:port`: its server certificate (`certName`), answering Hello as `nodeId`. */
async function startAgent(options: { nodeId: string; certName: string; host: string; capacity?: () => Promise<NodeCapacity>; versions?: number[] }): Promise<Agent> {
  const tls = { ca: readFileSync(join(dir, 'ca.pem')), cert: readFileSync(join(dir, `${options.certName}.pem`)), key: readFileSync(join(dir, `${options.certName}-key.pem`)) };
  const capacity = options.capacity ?? (async () => ({ cpuCount: 2, memoryMB: 4096, memoryAvailableMB: 3000, images: ['tidepool/base:latest'] }));
  // Hello reads only the capacity: the runtime is never called by these cases.
  const runtime = {} as SandboxRuntime;
  const protocol = nodeServiceHandler({ nodeId: options.nodeId, agentVersion: '2', capacity, startedAtMs: Date.now(), logger, versions: options.versions });
  const agent = createAgentServer({ nodeId: options.nodeId, version: '2', runtime, capacity, tls, logger, protocol });
  await new Promise<void>((resolve, reject) => {
    agent.server.once('error', reject);
    agent.server.listen(port, options.host, () => resolve());
  });
  agents.push(agent);
  const { address } = agent.server.address() as AddressInfo;
  return { server: agent, url: `https://${address}:${port}`, stop: () => agent.close() };
}

const discovery = (entries: string[], resolve?: (host: string) => Promise<string[]>, lostAfterMs = 30_000): NodeDiscovery =>
  new NodeDiscovery({ entries, tls: client, store, lostAfterMs, helloDeadlineMs: 5_000, logger, resolve });

const failure = (outcome: DiscoveryOutcome | undefined): NodeChannelError => {
  expect(outcome && 'error' in outcome, JSON.stringify(outcome)).toBe(true);
  const error = (outcome as { error: Error }).error;
  expect(error).toBeInstanceOf(NodeChannelError);
  return error as NodeChannelError;
};
const fingerprint = (certName: string): string => new X509Certificate(readFileSync(join(dir, `${certName}.pem`))).fingerprint256;

beforeAll(async () => {
  const tls = await ensureClusterTls(dir);
  client = { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) };
  await ensureNodeServerTls(dir, 'node-a', '127.0.0.2');
  await ensureNodeServerTls(dir, 'node-b', '127.0.0.3');
  // Another certificate from the same CA naming node-a (a re-issued or stolen name): same id, other identity.
  await ensureNodeServerTls(dir, 'node-a', '127.0.0.5', 'node-a-second');
  port = await getFreePort();
  server = await startPostgres();
  db = await PostgresDatabase.open({ url: server.url, logger });
  store = new NodeStore(db);
}, 120_000);

afterAll(async () => {
  for (const agent of agents) await agent.close().catch(() => undefined);
  await db?.close();
  await server?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('nodes found by the API over the node protocol (no database on nodes)', () => {
  it('every address of a name is one agent; the API writes their rows (bound to their certificates) and keeps them fresh; one that stops is lost, and returns', async () => {
    let available = 3000;
    const a = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2', capacity: async () => ({ cpuCount: 4, memoryMB: 8192, memoryAvailableMB: available-- }) });
    let b = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.3' });
    const resolved: string[] = [];
    const found = discovery([`https://agents.cluster.test:${port}`], async (host) => {
      resolved.push(host);
      return ['127.0.0.3', '127.0.0.2'];
    });
    const first = await found.roundNow();
    expect(resolved).toEqual(['agents.cluster.test']);
    expect(first).toEqual([
      { url: a.url, nodeId: 'node-a' },
      { url: b.url, nodeId: 'node-b' },
    ]);
    const rowA = (await store.get('node-a'))!;
    expect(rowA).toMatchObject({ url: a.url, version: '2', status: 'ready', identity: fingerprint('node-a-server'), capacity: { cpuCount: 4, memoryMB: 8192 } });
    expect((await store.get('node-b'))!).toMatchObject({ url: b.url, identity: fingerprint('node-b-server') });
    const registeredB = (await store.get('node-b'))!.registeredAt;
    await new Promise((r) => setTimeout(r, 20));
    await found.roundNow();
    const again = (await store.get('node-a'))!;
    expect(again.lastHeartbeat).toBeGreaterThan(rowA.lastHeartbeat);
    expect(again.capacity.memoryAvailableMB).toBeLessThan(rowA.capacity.memoryAvailableMB);
    expect(again.registeredAt).toBe(rowA.registeredAt); // the same agent process: no restart seen
    // node-b stops answering: its row ages until the sweep marks it lost; node-a's stays fresh.
    await b.stop();
    const third = await found.roundNow();
    expect(failure(third.find((o) => o.url === b.url)).code).toBe('unreachable');
    // (node-b's last heartbeat is older than 250 ms once enough time passed; node-a's stays fresh by its rounds)
    while (Date.now() - (await store.get('node-b'))!.lastHeartbeat <= 250) {
      await found.roundNow();
      await new Promise((r) => setTimeout(r, 50));
    }
    await found.roundNow();
    expect(await store.markLost(250)).toEqual(['node-b']);
    // It comes back (a new agent process): returning, with a new registration time (the replicas see a restart).
    b = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.3' });
    await found.roundNow();
    const back = (await store.get('node-b'))!;
    expect(back.status).toBe('returning');
    expect(back.registeredAt).not.toBe(registeredB);
    await a.stop();
    await b.stop();
  });

  it('refuses a node whose certificate does not name the id it claims, and writes no row', async () => {
    const liar = await startAgent({ nodeId: 'node-c', certName: 'node-a-server', host: '127.0.0.6' });
    const [outcome] = await discovery([liar.url]).roundNow();
    const error = failure(outcome);
    expect(error.code).toBe('identity');
    expect(error.message).toMatch(/claims id "node-c" but its certificate names "DNS:node-a/);
    expect(await store.get('node-c')).toBeUndefined();
    await liar.stop();
  });

  it('two nodes, one claiming the other\'s id: refused while the id\'s node lives (its row untouched); taken once that node is lost', async () => {
    await db.run('DELETE FROM nodes');
    const a = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2' });
    const found = discovery([a.url], undefined, 30_000);
    await found.roundNow();
    const held = (await store.get('node-a'))!;
    // Its own certificate names node-b: refused by the certificate check.
    const byOwnCert = await startAgent({ nodeId: 'node-a', certName: 'node-b-server', host: '127.0.0.4' });
    expect(failure((await discovery([byOwnCert.url]).roundNow())[0]).code).toBe('identity');
    // A certificate that does name node-a, at another address: refused because node-a is live elsewhere.
    const claimant = await startAgent({ nodeId: 'node-a', certName: 'node-a-second', host: '127.0.0.5' });
    const [outcome] = await discovery([claimant.url]).roundNow();
    const error = failure(outcome);
    expect(error.code).toBe('identity');
    expect(error.message).toMatch(/node id "node-a" is held by a live node at another address with another certificate/);
    expect(await store.get('node-a')).toMatchObject({ url: a.url, identity: held.identity, registeredAt: held.registeredAt });
    // Both in one replica's entries, racing every round: the holder stays the holder.
    const both = await discovery([a.url, claimant.url]).roundNow();
    expect(both.find((o) => o.url === a.url)).toEqual({ url: a.url, nodeId: 'node-a' });
    expect(failure(both.find((o) => o.url === claimant.url)).code).toBe('identity');
    // The holder is lost (no Hello for longer than the deadline): the id may move to the other certificate.
    await a.stop();
    await db.run('UPDATE nodes SET last_heartbeat = ? WHERE node_id = ?', [Date.now() - 60_000, 'node-a']);
    expect(await store.markLost(30_000)).toEqual(['node-a']);
    expect((await discovery([claimant.url]).roundNow())[0]).toEqual({ url: claimant.url, nodeId: 'node-a' });
    expect(await store.get('node-a')).toMatchObject({ url: claimant.url, identity: fingerprint('node-a-second'), status: 'returning' });
    await byOwnCert.stop();
    await claimant.stop();
  });

  it('an agent that speaks no version the API offers is refused with a typed error naming its versions; no row', async () => {
    await db.run('DELETE FROM nodes');
    const future = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.3', versions: [99] });
    const error = failure((await discovery([future.url]).roundNow())[0]);
    expect(error.code).toBe('version');
    expect(error.message).toContain('the node speaks 99');
    expect(await store.get('node-b')).toBeUndefined();
    await future.stop();
  });

  it('a node that reports a capacity the store refuses is refused as a protocol error; no row', async () => {
    await db.run('DELETE FROM nodes');
    const images = Array.from({ length: 1_500 }, (_, i) => `tidepool/fake-${i}:latest`);
    const liar = await startAgent({ nodeId: 'node-b', certName: 'node-b-server', host: '127.0.0.3', capacity: async () => ({ cpuCount: 2, memoryMB: 1024, memoryAvailableMB: 512, images }) });
    const error = failure((await discovery([liar.url]).roundNow())[0]);
    expect(error.code).toBe('protocol');
    expect(error.message).toMatch(/reported an invalid capacity: capacity.images/);
    expect(await store.get('node-b')).toBeUndefined();
    await liar.stop();
  });

  it('after the Hello, every call to a node checks its certificate against the node id, not the address', async () => {
    const a = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2' });
    const right = connectRemoteNode({ nodeId: 'node-a', url: a.url, tls: client });
    expect((await right.capacity()).cpuCount).toBe(2);
    const wrong = connectRemoteNode({ nodeId: 'node-b', url: a.url, tls: client });
    const error = await wrong.capacity().then(() => undefined, (e: unknown) => e as NodeChannelError);
    expect(error).toBeInstanceOf(NodeChannelError);
    expect(error!.code).toBe('identity');
    await expect(wrong.dial('198.19.192.2', 49983)).rejects.toThrow(/does not name node "node-b"/);
    right.close();
    wrong.close();
    await a.stop();
  });

  it('measures a Hello (a fresh mutual-TLS HTTP/2 connection each, as every heartbeat makes)', async () => {
    const a = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2' });
    const times: number[] = [];
    for (let i = 0; i < 20; i += 1) {
      const started = performance.now();
      expect((await helloNode({ url: a.url, tls: client, deadlineMs: 5_000 })).nodeId).toBe('node-a');
      times.push(performance.now() - started);
    }
    times.sort((x, y) => x - y);
    process.stderr.write(`[node-hello] Hello p50 over 20: ${times[10].toFixed(2)} ms (max ${times[19].toFixed(2)} ms), a fresh mTLS connection each\n`);
    await a.stop();
  });

  it('a name that does not resolve is reported and the round goes on with the rest', async () => {
    const a = await startAgent({ nodeId: 'node-a', certName: 'node-a-server', host: '127.0.0.2' });
    const found = discovery([`https://missing.cluster.test:${port}`, a.url], async () => {
      throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    });
    expect(await found.roundNow()).toEqual([{ url: a.url, nodeId: 'node-a' }]);
    // Real name resolution: every address of a name is one agent URL (localhost: at least 127.0.0.1).
    expect(await discovery([`https://localhost:${port}`]).agentUrls()).toContain(`https://127.0.0.1:${port}`);
    await a.stop();
  });
});

describe('a node holds no cluster secrets', () => {
  it('`tidepool node` refuses to start with database settings or API-only secrets, naming each variable and echoing no password', async () => {
    const error = await runNodeAgent({ TIDEPOOL_NODE_ID: 'node-a', TIDEPOOL_DATABASE_URL: 'postgres://tidepool:s3cret-pw@db:5432/tidepool', TIDEPOOL_SECRETS_KEY: 'abc' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/TIDEPOOL_DATABASE_URL is set: a node holds no database credentials/);
    expect(error?.message).toMatch(/TIDEPOOL_SECRETS_KEY is set/);
    expect(error?.message).not.toContain('s3cret-pw');
  });

  it('`tidepool node` refuses a certificate that does not name its node id', async () => {
    const error = await runNodeAgent({
      TIDEPOOL_NODE_ID: 'node-z',
      TIDEPOOL_NODE_TLS_CERT: join(dir, 'node-a-server.pem'),
      TIDEPOOL_NODE_TLS_KEY: join(dir, 'node-a-server-key.pem'),
      TIDEPOOL_NODE_TLS_CA: join(dir, 'ca.pem'),
      TIDEPOOL_DATA_DIR: join(dir, 'agent-data'),
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/TIDEPOOL_NODE_TLS_CERT: .* does not name this node's id "node-z"/);
  });

  it('the platform\'s database role is no superuser: it cannot read pg_authid nor make roles, yet owns its schema', async () => {
    expect(await db.get<{ rolsuper: boolean; rolcreaterole: boolean; rolcreatedb: boolean }>('SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user')).toEqual({
      rolsuper: false,
      rolcreaterole: false,
      rolcreatedb: false,
    });
    await expect(db.all('SELECT rolname, rolpassword FROM pg_authid')).rejects.toThrow(/permission denied/);
    await expect(db.run('CREATE ROLE intruder LOGIN SUPERUSER')).rejects.toThrow(/must be superuser/);
    await expect(db.run('CREATE ROLE intruder LOGIN')).rejects.toThrow(/permission denied/);
    // It made the platform's tables (migrations ran as it) and the node table it writes.
    expect(await db.get<{ owner: string }>("SELECT tableowner AS owner FROM pg_tables WHERE tablename = 'nodes'")).toEqual({ owner: 'tidepool' });
  });
});
