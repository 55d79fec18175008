/**
 * Cluster mode end to end (lean): an API configured with the cluster client certificate drives a node agent of a
 * one-node local cluster (its engine and agent in a network namespace on 198.19.<slot>.0/24) beside its own
 * embedded node, only because the agent's row is in the node table — built by the cluster factory
 * (connectRemoteNode over mutual TLS), every engine call and every stream to its containers through the agent.
 * With the published e2b SDK: creates spread over both nodes (clientID), commands and files on both; when the
 * agent's heartbeats stop its sandboxes answer 404 with the node-lost reason, the others keep working, new creates
 * avoid it. network.rules on both nodes: the agent's own egress proxy injects the secrets the API pushed to it (for
 * each sandbox its own), terminates HTTPS with the sandbox's CA kept on the agent's disk, takes a Secret.update and a
 * network update, and forgets the CA when the sandbox is killed; its stand-in host is a server inside the node's
 * namespace, whose name the agent resolves through a preloaded resolver (NODE_OPTIONS, test only).
 * The agent's row is heartbeated by this test through the API's node store (the agent cannot reach this
 * test's loopback database from its namespace; node-announcements.test.ts proves the agent's own database path).
 * Every address contacted is loopback or in 198.18.0.0/15. Needs root. CLUSTER_TEST_LOG=warn shows the API's log.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Secret } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BASE_IMAGE,
  agentFiles,
  clusterLayout,
  downCluster,
  ensureNodeServerTls,
  freeClusterSlot,
  nodeLayout,
  startNodeAgentProcess,
  stopNodeAgentProcess,
  upCluster,
  type ClusterState,
} from '@tidepool/testkit';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { egressNameResolver } from '../src/runtime/docker/egress-proxy.ts';
import { type StandinHosts, startStandinHosts, startStandinServerIn } from './support/standin-hosts.ts';
import { agentStandinResolver, headersSeen as seenVia } from './support/agent-standin.ts';
import { PROXY_ADDRESSES, startStandinProxies } from './support/standin-proxies.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { pollUntil as until } from './support/poll-until.ts';

const isRoot = process.getuid?.() === 0;
const name = `w${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-mode-test-'));
let state: ClusterState | undefined;
let platform: TestPlatform | undefined;
let probe: RemoteNode;
let beating: NodeJS.Timeout | undefined;
/** Set when the test stops the heartbeats: a beat in flight then neither writes nor schedules another. */
let heartbeatsStopped = false;
const sandboxes: Sandbox[] = [];
/** network.rules: a stand-in HTTP host (198.18.58.0/24, a namespace this test makes) and a secret its rule injects. */
let standin: StandinHosts | undefined;
const RULE_HOST = 'api.standin.test';
const secretName = `tok-${randomBytes(4).toString('hex')}`;
const secretValue = `tpsv-${randomBytes(12).toString('hex')}`;
const originalResolve = egressNameResolver.resolve;
/** The agent's stand-in host: a server on this address inside the node's namespace (where the agent's proxy dials from). */
const NODE_STANDIN = '198.18.61.7';
let nodeStandin: { stop(): Promise<void> } | undefined;
let clusterSlot = 0;
let agentEnv: Record<string, string> = {};
const otherSecret = `tok2-${randomBytes(4).toString('hex')}`;
const otherValue = `tpsv2-${randomBytes(12).toString('hex')}`;
const digest = (value: string): string => `sha256:${createHash('sha256').update(value).digest('hex')}`;
const bearerRules = (secret: string) => ({ [RULE_HOST]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(secret)}` } } }] });
const headersSeen = (sandbox: Sandbox, address: string) => seenVia(sandbox, RULE_HOST, address);

/** Runs `work` with `nodeId` drained (creates go to the other node), then makes it placeable again. */
async function drained<T>(nodeId: string, work: () => Promise<T>): Promise<T> {
  expect((await api(platform!, 'POST', `/nodes/${nodeId}`, { status: 'draining' }, platform!.adminKey)).status).toBe(204);
  try {
    return await work();
  } finally {
    expect((await api(platform!, 'POST', `/nodes/${nodeId}`, { status: 'ready' }, platform!.adminKey)).status).toBe(204);
  }
}

const clientIdOf = async (id: string): Promise<string> => (await api(platform!, 'GET', `/sandboxes/${id}`)).body.clientID;

describe.skipIf(!isRoot)('cluster mode: an API drives a node agent it finds in the node table', () => {
  beforeAll(async () => {
    const slot = await freeClusterSlot();
    clusterSlot = slot;
    agentEnv = agentStandinResolver(join(dir, 'standin-resolve.cjs'), { [RULE_HOST]: NODE_STANDIN });
    state = await upCluster({ name, slot, dir, nodes: 1, images: [BASE_IMAGE], agentEnv });
    nodeStandin = await startStandinServerIn(state.nodes[0].netns, NODE_STANDIN);
    const node = state.nodes[0];
    const tls = state.tls!;
    probe = connectRemoteNode({ nodeId: node.id, url: node.agentUrl!, tls: { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) } });
    platform = await startTestPlatform({ logLevel: (process.env.CLUSTER_TEST_LOG as 'warn' | undefined) ?? 'silent', nodeId: 'api-node', nodeLostAfterSeconds: 3, clusterClientCert: tls.cert, clusterClientKey: tls.key, clusterCa: tls.ca });
    const store = platform.nodes.store;
    await store.register({ nodeId: node.id, url: node.agentUrl!, version: 'agent', capacity: await probe.capacity() });
    let capacity = await probe.capacity();
    const beat = async (): Promise<void> => {
      // While its agent restarts (a case below) the node keeps heartbeating with what it last reported.
      capacity = await probe.capacity().catch(() => capacity);
      if (heartbeatsStopped) return;
      await store.heartbeat(node.id, capacity).catch(() => undefined);
      if (heartbeatsStopped) return;
      beating = setTimeout(() => void beat(), 500);
    };
    void beat();
    await until('the API builds the agent\'s node from its row', async () => platform!.nodes.set.has(node.id) && platform!.nodes.set.status(node.id) === 'ready');
    standin = await startStandinHosts(57);
    const standinAddress = standin.internet[0];
    egressNameResolver.resolve = async (host) => (host === RULE_HOST ? [standinAddress] : originalResolve(host));
    await Secret.create(secretName, secretValue, platform.sdk);
    await Secret.create(otherSecret, otherValue, platform.sdk);
  }, 600_000);

  afterAll(async () => {
    heartbeatsStopped = true;
    clearTimeout(beating);
    for (const sandbox of sandboxes) await sandbox.kill().catch(() => undefined);
    probe?.close();
    egressNameResolver.resolve = originalResolve;
    await standin?.stop();
    await nodeStandin?.stop();
    await platform?.dispose();
    if (state) await downCluster({ name, dir }).catch((error: unknown) => process.stderr.write(`[cluster-mode] down failed: ${String(error)}\n`));
    rmSync(dir, { recursive: true, force: true });
  }, 300_000);

  it('creates spread over the embedded node and the agent; commands and files work on both', async () => {
    const created = await Promise.all([0, 1, 2, 3].map(() => Sandbox.create({ ...platform!.sdk, timeoutMs: 300_000 })));
    sandboxes.push(...created);
    const nodes = await Promise.all(created.map((s) => clientIdOf(s.sandboxId)));
    expect(new Set(nodes)).toEqual(new Set(['api-node', state!.nodes[0].id]));
    for (const [i, sandbox] of created.entries()) {
      const result = await sandbox.commands.run(`echo hello-${i} && hostname`);
      expect(result.stdout).toContain(`hello-${i}`);
      await sandbox.files.write(`/tmp/f${i}.txt`, `on ${nodes[i]}`);
      expect(await sandbox.files.read(`/tmp/f${i}.txt`)).toBe(`on ${nodes[i]}`);
    }
    // The agent's sandboxes really are on its engine.
    const onAgent = created.filter((_, i) => nodes[i] === state!.nodes[0].id);
    const managed = await probe.runtime.listManaged();
    for (const sandbox of onAgent) expect(managed.some((c) => c.sandboxId === sandbox.sandboxId)).toBe(true);
  }, 300_000);

  it('network.rules on both nodes: the agent applies them with the secrets the API pushed and the sandbox\'s own CA kept on its disk', async () => {
    const agentId = state!.nodes[0].id;
    const create = (secret: string) => Sandbox.create('base', { ...platform!.sdk, timeoutMs: 300_000, network: { rules: bearerRules(secret) } });
    // The embedded node's proxy, as before.
    const embedded = await drained(agentId, () => create(secretName));
    sandboxes.push(embedded);
    expect(await clientIdOf(embedded.sandboxId)).toBe('api-node');
    expect((await headersSeen(embedded, standin!.internet[0])).authorization).toBe(digest(`Bearer ${secretValue}`));
    // Two sandboxes on the agent, each naming another secret: each gets its own value, never the other's.
    const [a, b] = await drained('api-node', () => Promise.all([create(secretName), create(otherSecret)]));
    sandboxes.push(a!, b!);
    for (const sandbox of [a!, b!]) expect(await clientIdOf(sandbox.sandboxId)).toBe(agentId);
    expect((await headersSeen(a!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${secretValue}`));
    expect((await headersSeen(b!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${otherValue}`));
    // HTTPS: the agent's proxy terminates TLS with a's own CA, which a trusts (the certificate the agent keeps, installed
    // by the API); the stand-in's self-signed certificate does not verify upstream, which the proxy answers with a 502.
    const ca = await probe.egress!.caCertificate(a!.sandboxId);
    expect((await a!.files.read('/usr/local/share/ca-certificates/tidepool-egress-ca.crt')).trim()).toBe(ca.trim());
    expect(await probe.egress!.caCertificate(b!.sandboxId)).not.toBe(ca);
    const https = await a!.commands.run(`curl -sS --max-time 15 -w ' status=%{http_code}' --resolve ${RULE_HOST}:443:${NODE_STANDIN} https://${RULE_HOST}/headers`, { timeoutMs: 30_000 });
    expect(https.stdout).toMatch(/cannot open a verified TLS connection to api\.standin\.test[\s\S]* status=502$/);
    // A Secret.update is pushed to the agent and in force for the next request.
    const updated = `tpsv-new-${randomBytes(8).toString('hex')}`;
    await Secret.update(secretName, updated, platform!.sdk);
    expect((await headersSeen(a!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${updated}`));
    expect((await headersSeen(b!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${otherValue}`));
    // A network update of a sandbox on the agent: its new rules (and their secret) are in force at once.
    expect((await api(platform!, 'PUT', `/sandboxes/${a!.sandboxId}/network`, { rules: bearerRules(otherSecret) })).status).toBe(204);
    expect((await headersSeen(a!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${otherValue}`));
    // The agent restarts (its node stays ready): it has forgotten the pushed secrets and the rules it held; the API
    // sees the new registration and puts both back, so the next request carries the header again.
    const cluster = clusterLayout(name, clusterSlot, dir);
    const layout = nodeLayout(cluster, state!.nodes[0].index);
    await stopNodeAgentProcess(layout);
    await startNodeAgentProcess(layout, { serverTls: await ensureNodeServerTls(cluster.tlsDir, agentId, layout.address), clientTls: state!.tls!, platformId: `cluster-${name}`, env: agentEnv });
    await platform!.nodes.store.register({ nodeId: agentId, url: state!.nodes[0].agentUrl!, version: 'agent', capacity: await probe.capacity() });
    await until('the restarted agent has b\'s secret again', async () => (await headersSeen(b!, NODE_STANDIN).catch(() => ({}) as Record<string, string>)).authorization === digest(`Bearer ${otherValue}`), 30_000);
    expect(platform!.nodes.set.status(agentId)).toBe('ready');
    // Killed: the agent forgets its CA (the key's directory on the node's disk goes).
    const caDir = join(agentFiles(layout).dataDir, 'sandbox-ca', a!.sandboxId);
    expect(existsSync(join(caDir, 'ca.key'))).toBe(true);
    await a!.kill();
    sandboxes.splice(sandboxes.indexOf(a!), 1);
    await until('the agent dropped the killed sandbox\'s CA', async () => !existsSync(caDir), 10_000);
    expect((await headersSeen(b!, NODE_STANDIN)).authorization).toBe(digest(`Bearer ${otherValue}`));
  }, 300_000);

  it('network.egressProxy on the agent: its TCP leaves through the owner\'s SOCKS5 proxy, with the password the API opened for it', async () => {
    const proxies = await startStandinProxies('owner', 'owner-pass', state!.nodes[0].netns);
    try {
      const egressProxy = { address: `${PROXY_ADDRESSES.socks5}:1080`, username: 'owner', password: 'owner-pass' };
      const sandbox = await drained('api-node', () => Sandbox.create('base', { ...platform!.sdk, timeoutMs: 300_000, network: { egressProxy } }));
      sandboxes.push(sandbox);
      expect(await clientIdOf(sandbox.sandboxId)).toBe(state!.nodes[0].id);
      const answer = await sandbox.commands.run(`curl -sS --max-time 10 http://${PROXY_ADDRESSES.destination}:8080/`, { timeoutMs: 30_000 });
      expect(answer.stdout.trim()).toBe(`dest from=${PROXY_ADDRESSES.socks5} host=${PROXY_ADDRESSES.destination}:8080`);
      expect(proxies.records).toContainEqual({ proxy: 'socks5', target: `${PROXY_ADDRESSES.destination}:8080`, atyp: 1, credentials: 'owner:owner-pass', ok: true });
      // getInfo shows the address and user, never the password.
      expect(JSON.stringify((await api(platform!, 'GET', `/sandboxes/${sandbox.sandboxId}`)).body)).not.toContain('owner-pass');
    } finally {
      await proxies.stop();
    }
  }, 300_000);

  it('a node whose heartbeats stop is lost: its sandboxes 404 with the reason, the others work, new creates avoid it', async () => {
    const agentId = state!.nodes[0].id;
    const placed = await Promise.all(sandboxes.map(async (s) => ({ sandbox: s, nodeId: await clientIdOf(s.sandboxId) })));
    // (a beat already in flight when the timer is cleared would otherwise schedule the next one)
    heartbeatsStopped = true;
    clearTimeout(beating);
    beating = undefined;
    await until('the agent node is lost', async () => platform!.nodes.set.status(agentId) === 'lost', 20_000);
    for (const { sandbox, nodeId } of placed) {
      const answer = await api(platform!, 'GET', `/sandboxes/${sandbox.sandboxId}`);
      if (nodeId === agentId) {
        expect(answer.status).toBe(404);
        expect(answer.body.message).toMatch(new RegExp(`node "${agentId}" was lost`));
      } else {
        expect(answer.status).toBe(200);
        expect((await sandbox.commands.run('echo still-here')).stdout).toContain('still-here');
      }
    }
    const later = await Promise.all([0, 1].map(() => Sandbox.create({ ...platform!.sdk, timeoutMs: 120_000 })));
    sandboxes.push(...later);
    for (const sandbox of later) expect(await clientIdOf(sandbox.sandboxId)).toBe('api-node');
  }, 300_000);
});
