/**
 * An engine-free `tidepool api` (TIDEPOOL_EMBEDDED_NODE=off, DOCKER_HOST pointing at a socket that does not exist)
 * driving the two node agents of a local cluster over mutual TLS — every sandbox, warm-pool container and volume is
 * on an agent. With the published e2b SDK: creates spread over both agents; a create claims a container from a
 * remote node's warm pool (started and warmed through the agent); a volume made on node 2 is mounted by a sandbox
 * placed there and its content API is forwarded to node 2's agent (files land on node 2's disk only); a template
 * build answers a clear error; a create with network.rules is accepted (no embedded node needed) and the agent it lands on
 * injects the secret the API pushed to it (stand-in servers in the nodes' namespaces, agent-standin.ts). The agents' rows are heartbeated by this test through the API's node store (as in
 * cluster-mode.test.ts: the agents cannot reach this test's loopback database from their namespaces). Every address
 * contacted is loopback or in 198.18.0.0/15. Needs root. CLUSTER_TEST_LOG=warn shows the API's log.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthenticationError, Sandbox, Secret, Volume } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentFiles, BASE_IMAGE, clusterLayout, downCluster, nodeLayout, freeClusterSlot, removeTree, upCluster, type ClusterState } from '@tidepool/testkit';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { startPlatform } from '../src/server/platform.ts';
import { api, type TestPlatform } from './support/start-platform.ts';
import { pollUntil as until } from './support/poll-until.ts';
import { agentStandinResolver, headersSeen } from './support/agent-standin.ts';
import { startStandinServerIn } from './support/standin-hosts.ts';

const isRoot = process.getuid?.() === 0;
const name = `f${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-engine-free-test-'));
const NO_ENGINE = 'unix:///nonexistent/tidepool-engine-free-test.sock';
let state: ClusterState | undefined;
let platform: TestPlatform | undefined;
const probes = new Map<string, RemoteNode>();
let beating: NodeJS.Timeout | undefined;
const sandboxes: Sandbox[] = [];
let previousVolumeUrl: string | undefined;
/** network.rules: a stand-in server at this address inside each node's namespace, named RULE_HOST for the agents. */
const RULE_HOST = 'api.standin.test';
const NODE_STANDIN = '198.18.61.7';
const standins: Array<{ stop(): Promise<void> }> = [];

const clientIdOf = async (id: string): Promise<string> => (await api(platform!, 'GET', `/sandboxes/${id}`)).body.clientID;
const nodeIds = (): string[] => state!.nodes.map((n) => n.id);
const readyIn = (nodeId: string): number => platform!.pools?.of(nodeId)?.stats().ready ?? 0;

describe.skipIf(!isRoot)('an engine-free API drives two node agents', () => {
  beforeAll(async () => {
    const slot = await freeClusterSlot();
    state = await upCluster({ name, slot, dir, nodes: 2, images: [BASE_IMAGE], agentEnv: agentStandinResolver(join(dir, 'standin-resolve.cjs'), { [RULE_HOST]: NODE_STANDIN }) });
    for (const node of state.nodes) standins.push(await startStandinServerIn(node.netns, NODE_STANDIN));
    const tls = state.tls!;
    const pem = { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) };
    for (const node of state.nodes) probes.set(node.id, connectRemoteNode({ nodeId: node.id, url: node.agentUrl!, tls: pem }));
    // Not startTestPlatform: it makes sure the host engine has the base image, and this API has no engine.
    const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-api-'));
    const started = await startPlatform(
      {
        host: '127.0.0.1',
        port: 0,
        dataDir,
        logLevel: (process.env.CLUSTER_TEST_LOG as 'warn' | undefined) ?? 'silent',
        embeddedNode: false,
        dockerHost: NO_ENGINE,
        nodeLostAfterSeconds: 10,
        warmPool: { base: 1 },
        warmPoolAdaptive: false,
        clusterClientCert: tls.cert,
        clusterClientKey: tls.key,
        clusterCa: tls.ca,
      },
      { env: { ...process.env, DOCKER_HOST: NO_ENGINE } },
    );
    platform = Object.assign(started, {
      dataDir,
      sdk: { apiKey: started.apiKey, apiUrl: started.url, sandboxUrl: started.url },
      async dispose() {
        await started.close().catch(() => undefined);
        removeTree(dataDir);
      },
    });
    const store = platform.nodes.store;
    for (const node of state.nodes) await store.register({ nodeId: node.id, url: node.agentUrl!, version: 'agent', capacity: await probes.get(node.id)!.capacity() });
    const beat = async (): Promise<void> => {
      // A node whose agent is gone (the cluster coming down) just misses its heartbeat.
      for (const [id, probe] of probes) await probe.capacity().then((capacity) => store.heartbeat(id, capacity)).catch(() => undefined);
      beating = setTimeout(() => void beat(), 1_000);
    };
    void beat();
    await until('the API builds both agents\' nodes from their rows', () => nodeIds().every((id) => platform!.nodes.set.status(id) === 'ready'), 60_000);
    previousVolumeUrl = process.env.E2B_VOLUME_API_URL;
    process.env.E2B_VOLUME_API_URL = platform.url;
  }, 900_000);

  afterAll(async () => {
    if (previousVolumeUrl === undefined) delete process.env.E2B_VOLUME_API_URL;
    else process.env.E2B_VOLUME_API_URL = previousVolumeUrl;
    clearTimeout(beating);
    for (const sandbox of sandboxes) await sandbox.kill().catch(() => undefined);
    await platform?.dispose();
    for (const probe of probes.values()) probe.close();
    for (const standin of standins) await standin.stop();
    if (state) await downCluster({ name, dir }).catch((error: unknown) => process.stderr.write(`[engine-free] down failed: ${String(error)}\n`));
    rmSync(dir, { recursive: true, force: true });
  }, 600_000);

  it('runs with no engine of its own: no embedded node, no engine watch, no local volumes; /nodes lists the two agents', async () => {
    expect(platform!.nodes.set.embeddedId).toBeUndefined();
    expect(platform!.engineWatch).toBeUndefined();
    expect(platform!.warmPool).toBeUndefined();
    expect(existsSync(join(platform!.dataDir, 'volumes'))).toBe(false);
    const listed = await api(platform!, 'GET', '/nodes', undefined, platform!.adminKey);
    expect(listed.status).toBe(200);
    expect((listed.body as Array<{ nodeID: string }>).map((n) => n.nodeID).sort()).toEqual(nodeIds().sort());
  });

  it('keeps a warm pool on each agent and serves a create from a remote node\'s pool', async () => {
    await until('both agents have a ready pool container', () => nodeIds().every((id) => readyIn(id) === 1), 180_000);
    const before = platform!.pools!.stats().claimedTotal;
    const pooledIds = new Map<string, string>();
    for (const [id, probe] of probes) for (const c of await probe.runtime.listManaged()) if (c.pooled) pooledIds.set(c.sandboxId, id);
    expect(pooledIds.size).toBe(2);
    const sandbox = await Sandbox.create({ ...platform!.sdk, timeoutMs: 300_000 });
    sandboxes.push(sandbox);
    expect(platform!.pools!.stats().claimedTotal).toBe(before + 1);
    // The sandbox is the pooled container itself, on the agent that warmed it.
    expect(pooledIds.get(sandbox.sandboxId)).toBe(await clientIdOf(sandbox.sandboxId));
    expect((await sandbox.commands.run('echo from-the-pool')).stdout).toContain('from-the-pool');
    const nodeId = pooledIds.get(sandbox.sandboxId)!;
    await until('the claimed node\'s pool refills', () => readyIn(nodeId) === 1, 180_000);
  }, 400_000);

  it('spreads creates over both agents; commands and files work on each', async () => {
    const created = await Promise.all([0, 1, 2, 3].map(() => Sandbox.create({ ...platform!.sdk, timeoutMs: 300_000 })));
    sandboxes.push(...created);
    const placed = await Promise.all(created.map((s) => clientIdOf(s.sandboxId)));
    expect(new Set(placed)).toEqual(new Set(nodeIds()));
    for (const [i, sandbox] of created.entries()) {
      await sandbox.files.write(`/tmp/f${i}.txt`, `on ${placed[i]}`);
      expect((await sandbox.commands.run(`cat /tmp/f${i}.txt`)).stdout).toBe(`on ${placed[i]}`);
      const managed = await probes.get(placed[i])!.runtime.listManaged();
      expect(managed.some((c) => c.sandboxId === sandbox.sandboxId)).toBe(true);
    }
  }, 400_000);

  it('puts a volume on node 2: a sandbox mounting it is placed there and its content API is served by node 2', async () => {
    const [first, second] = nodeIds().sort();
    const onFirst = await Volume.create(`ef-a-${name}`, platform!.sdk);
    const onSecond = await Volume.create(`ef-b-${name}`, platform!.sdk);
    const diskOf = (nodeId: string, vol: Volume): string => join(agentFiles(nodeLayout(clusterLayout(name, state!.slot, dir), Number(nodeId.replace('node', '')))).dataDir, 'volumes', vol.volumeId);
    // Each new volume goes on the node holding the fewest (ties to the smaller id).
    expect(existsSync(diskOf(first, onFirst))).toBe(true);
    expect(existsSync(diskOf(second, onSecond))).toBe(true);
    expect(existsSync(diskOf(first, onSecond))).toBe(false);

    await onSecond.writeFile('/hello.txt', 'written through the API');
    expect(readFileSync(join(diskOf(second, onSecond), 'hello.txt'), 'utf8')).toBe('written through the API');
    const sandbox = await Sandbox.create({ ...platform!.sdk, timeoutMs: 300_000, volumeMounts: { '/data': onSecond } });
    sandboxes.push(sandbox);
    expect(await clientIdOf(sandbox.sandboxId)).toBe(second);
    expect((await sandbox.commands.run('cat /data/hello.txt')).stdout).toBe('written through the API');
    await sandbox.commands.run('echo -n from-the-sandbox > /data/back.txt');
    expect(await onSecond.readFile('/back.txt')).toBe('from-the-sandbox');
    expect((await onSecond.list('/')).map((e) => e.name).sort()).toEqual(['back.txt', 'hello.txt']);
    // A wrong token is refused by the API itself (nothing reaches the node).
    const forged = await Volume.connect(onSecond.volumeId, platform!.sdk);
    Object.assign(forged, { token: 'not-the-token' });
    await expect(forged.readFile('/hello.txt')).rejects.toBeInstanceOf(AuthenticationError);

    expect((await api(platform!, 'DELETE', `/volumes/${onSecond.volumeId}`)).status).toBe(409);
    await sandbox.kill();
    expect((await api(platform!, 'DELETE', `/volumes/${onSecond.volumeId}`)).status).toBe(204);
    expect(existsSync(diskOf(second, onSecond))).toBe(false);
    expect((await api(platform!, 'DELETE', `/volumes/${onFirst.volumeId}`)).status).toBe(204);
    expect(existsSync(diskOf(first, onFirst))).toBe(false);
  }, 400_000);

  it('accepts network.rules: the agent the sandbox lands on injects the secret the API pushed to it', async () => {
    const secret = `ef-tok-${randomBytes(4).toString('hex')}`;
    const value = `ef-${randomBytes(12).toString('hex')}`;
    await Secret.create(secret, value, platform!.sdk);
    const rules = { [RULE_HOST]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(secret)}` } } }] };
    const sandbox = await Sandbox.create('base', { ...platform!.sdk, timeoutMs: 300_000, network: { rules } });
    sandboxes.push(sandbox);
    expect(nodeIds()).toContain(await clientIdOf(sandbox.sandboxId));
    const seen = await headersSeen(sandbox, RULE_HOST, NODE_STANDIN);
    expect(seen.authorization).toBe(`sha256:${createHash('sha256').update(`Bearer ${value}`).digest('hex')}`);
    await Secret.destroy(secret, platform!.sdk);
  }, 300_000);

  it('answers a template build with a clear error (the builder needs an engine)', async () => {
    const created = await api(platform!, 'POST', '/v3/templates', { name: `ef-${name}`, cpuCount: 1, memoryMB: 512 });
    expect(created.status).toBe(202);
    const { templateID, buildID } = created.body as { templateID: string; buildID: string };
    const started = await api(platform!, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromImage: 'tidepool/base:latest', steps: [] });
    expect(started.status).toBeLessThan(300);
    const status = await until('the build fails', async () => {
      const answer = await api(platform!, 'GET', `/templates/${templateID}/builds/${buildID}/status`);
      return answer.body?.status === 'error' ? answer.body : undefined;
    }, 60_000);
    expect(JSON.stringify(status)).toMatch(/TIDEPOOL_EMBEDDED_NODE=off/);
  }, 120_000);
});
