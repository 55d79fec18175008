/**
 * Cluster mode end to end (lean): an API configured with the cluster client certificate drives a node agent of a
 * one-node local cluster (its engine and agent in a network namespace on 198.19.<slot>.0/24) beside its own
 * embedded node, only because the agent's row is in the node table — built by the cluster factory
 * (connectRemoteNode over mutual TLS), every engine call and every stream to its containers through the agent.
 * With the published e2b SDK: creates spread over both nodes (clientID), commands and files on both; when the
 * agent's heartbeats stop its sandboxes answer 404 with the node-lost reason, the others keep working, new creates
 * avoid it. The agent's row is heartbeated by this test through the API's node store (the agent cannot reach this
 * test's loopback database from its namespace; node-announcements.test.ts proves the agent's own database path).
 * Every address contacted is loopback or in 198.18.0.0/15. Needs root. CLUSTER_TEST_LOG=warn shows the API's log.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Secret } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, downCluster, freeClusterSlot, upCluster, type ClusterState } from '@tidepool/testkit';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { egressNameResolver } from '../src/runtime/docker/egress-proxy.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { pollUntil as until } from './support/poll-until.ts';

const isRoot = process.getuid?.() === 0;
const name = `w${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-mode-test-'));
let state: ClusterState | undefined;
let platform: TestPlatform | undefined;
let probe: RemoteNode;
let beating: NodeJS.Timeout | undefined;
const sandboxes: Sandbox[] = [];
/** network.rules: a stand-in HTTP host (198.18.58.0/24, a namespace this test makes) and a secret its rule injects. */
let standin: StandinHosts | undefined;
const RULE_HOST = 'api.standin.test';
const secretName = `tok-${randomBytes(4).toString('hex')}`;
const secretValue = `tpsv-${randomBytes(12).toString('hex')}`;
const originalResolve = egressNameResolver.resolve;

const clientIdOf = async (id: string): Promise<string> => (await api(platform!, 'GET', `/sandboxes/${id}`)).body.clientID;

describe.skipIf(!isRoot)('cluster mode: an API drives a node agent it finds in the node table', () => {
  beforeAll(async () => {
    const slot = await freeClusterSlot();
    state = await upCluster({ name, slot, dir, nodes: 1, images: [BASE_IMAGE] });
    const node = state.nodes[0];
    const tls = state.tls!;
    probe = connectRemoteNode({ nodeId: node.id, url: node.agentUrl!, tls: { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) } });
    platform = await startTestPlatform({ logLevel: (process.env.CLUSTER_TEST_LOG as 'warn' | undefined) ?? 'silent', nodeId: 'api-node', nodeLostAfterSeconds: 3, clusterClientCert: tls.cert, clusterClientKey: tls.key, clusterCa: tls.ca });
    const store = platform.nodes.store;
    await store.register({ nodeId: node.id, url: node.agentUrl!, version: 'agent', capacity: await probe.capacity() });
    const beat = async (): Promise<void> => {
      await store.heartbeat(node.id, await probe.capacity()).catch(() => undefined);
      beating = setTimeout(() => void beat(), 500);
    };
    void beat();
    await until('the API builds the agent\'s node from its row', async () => platform!.nodes.set.has(node.id) && platform!.nodes.set.status(node.id) === 'ready');
    standin = await startStandinHosts(57);
    const standinAddress = standin.internet[0];
    egressNameResolver.resolve = async (host) => (host === RULE_HOST ? [standinAddress] : originalResolve(host));
    await Secret.create(secretName, secretValue, platform.sdk);
  }, 600_000);

  afterAll(async () => {
    clearTimeout(beating);
    for (const sandbox of sandboxes) await sandbox.kill().catch(() => undefined);
    probe?.close();
    egressNameResolver.resolve = originalResolve;
    await standin?.stop();
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

  it('network.rules: creates with transforms go to the node that applies them (not the agent) and get the header there; adding rules on the agent is a 400 naming it', async () => {
    const agentId = state!.nodes[0].id;
    const rules = { [RULE_HOST]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(secretName)}` } } }] };
    const ruled = await Promise.all([0, 1, 2, 3].map(() => Sandbox.create('base', { ...platform!.sdk, timeoutMs: 300_000, network: { rules } })));
    sandboxes.push(...ruled);
    // Without rules these would spread over both nodes (the first case): with them, only the embedded node is placed.
    for (const sandbox of ruled) expect(await clientIdOf(sandbox.sandboxId)).toBe('api-node');
    const seen = await ruled[0]!.commands.run(`curl -sS --max-time 10 --resolve ${RULE_HOST}:80:${standin!.internet[0]} http://${RULE_HOST}/headers`, { timeoutMs: 30_000 });
    expect(JSON.parse(seen.stdout).authorization).toBe(`sha256:${createHash('sha256').update(`Bearer ${secretValue}`).digest('hex')}`);
    // A sandbox already on the agent cannot take rules: refused with the node named, its rules unchanged, it keeps working.
    let onAgent: Sandbox | undefined;
    for (const sandbox of sandboxes) if (!onAgent && (await clientIdOf(sandbox.sandboxId)) === agentId) onAgent = sandbox;
    const refused = await api(platform!, 'PUT', `/sandboxes/${onAgent!.sandboxId}/network`, { rules });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain(`network.rules cannot be applied on node "${agentId}"`);
    expect((await api(platform!, 'GET', `/sandboxes/${onAgent!.sandboxId}`)).body.network?.rules).toBeUndefined();
    expect((await onAgent!.commands.run('echo unchanged')).stdout).toContain('unchanged');
    // With the embedded node drained, nothing can take them: the create is refused (400) and nothing is left behind.
    expect((await api(platform!, 'POST', '/nodes/api-node', { status: 'draining' }, platform!.adminKey)).status).toBe(204);
    try {
      const before = (await api(platform!, 'GET', '/v2/sandboxes')).body.length;
      const answer = await api(platform!, 'POST', '/sandboxes', { templateID: 'base', network: { rules } });
      expect(answer.status).toBe(503);
      expect((await api(platform!, 'GET', '/v2/sandboxes')).body.length).toBe(before);
    } finally {
      expect((await api(platform!, 'POST', '/nodes/api-node', { status: 'ready' }, platform!.adminKey)).status).toBe(204);
    }
  }, 300_000);

  it('a node whose heartbeats stop is lost: its sandboxes 404 with the reason, the others work, new creates avoid it', async () => {
    const agentId = state!.nodes[0].id;
    const placed = await Promise.all(sandboxes.map(async (s) => ({ sandbox: s, nodeId: await clientIdOf(s.sandboxId) })));
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
