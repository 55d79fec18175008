/**
 * Two nodes in one API: the embedded node and a second SandboxNode built in this process. Both drive the host's
 * Docker engine (each with its own platform label and sandbox network, so each node sees only its containers) —
 * the multi-engine local cluster's container subnets are not routable from the host yet. With the published e2b
 * SDK: creates spread over both nodes (clientID differs), commands work on both, a node that stops heartbeating is
 * marked lost (its sandboxes 404 with the reason over REST and the proxy, the other node's keep working, new
 * creates avoid it), and when it heartbeats again it is reconciled (its sandboxes back, a container the platform
 * forgot removed).
 */
import http from 'node:http';
import Docker from 'dockerode';
import { Sandbox, Volume } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialDirect } from '../src/nodes/local-node.ts';
import { DockerRuntime } from '../src/runtime/docker/docker-runtime.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { api, removeLabelled, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { pollUntil as until } from './support/poll-until.ts';

const NODE_B_NETWORK = `tidepool-test-nodeb-${process.pid}`;
let platform: TestPlatform;
let runtimeB: SandboxRuntime;
/** Streams opened through node-b's dial (the path a node on another machine takes: proxy and envd calls). */
const dialsB: Array<{ address: string; port: number }> = [];

/** True when an IPv4 address lies in `a.b.c.d/n`. */
function inSubnet(address: string, cidr: string): boolean {
  const toInt = (ip: string): number => ip.split('.').reduce((n, part) => (n << 8) + Number(part), 0) >>> 0;
  const [base, bits] = cidr.split('/');
  const mask = Number(bits) === 0 ? 0 : (~0 << (32 - Number(bits))) >>> 0;
  return ((toInt(address) & mask) >>> 0) === ((toInt(base!) & mask) >>> 0);
}

const clientIdOf = async (id: string): Promise<string> => (await api(platform, 'GET', `/sandboxes/${id}`)).body.clientID;

/** envd's /health through the platform's proxy, header-routed. */
const throughProxy = (id: string) => fetch(`${platform.url}/health`, { headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': '49983' } });

beforeAll(async () => {
  platform = await startTestPlatform({ nodeId: 'node-a', nodeLostAfterSeconds: 3 }, undefined, {
    extraNodes: ({ platformId, docker, config }) => {
      runtimeB = new DockerRuntime({ docker, network: NODE_B_NETWORK, platformId: `${platformId}-nodeb`, logger: pino({ level: 'silent' }), isolation: config.sandboxIsolation, helperImage: config.baseImage });
      // Not the direct dial: the platform opens every stream to node-b's containers through it, as for a remote node.
      return [{ nodeId: 'node-b', runtime: runtimeB, dial: (address: string, port: number) => (dialsB.push({ address, port }), dialDirect(address, port)) }];
    },
  });
}, 600_000);

afterAll(async () => {
  if (!platform) return;
  const platformId = platform.platformId;
  await platform.dispose();
  await removeLabelled(`${platformId}-nodeb`);
  await new Docker().getNetwork(NODE_B_NETWORK).remove().catch(() => undefined);
}, 180_000);

describe('two nodes', () => {
  const sandboxes: Sandbox[] = [];

  it('GET /nodes lists both nodes ready with their capacity; GET /nodes/{id} details one; unknown and malformed ids are refused', async () => {
    const list = await api(platform, 'GET', '/nodes', undefined, platform.adminKey);
    expect(list.status).toBe(200);
    expect(list.body.map((n: { nodeID: string }) => n.nodeID).sort()).toEqual(['node-a', 'node-b']);
    for (const node of list.body) {
      expect(node).toMatchObject({ status: 'ready', clusterID: 'default', sandboxCount: 0, sandboxStartingCount: 0, metrics: { cpuCount: expect.any(Number) } });
      expect(node.metrics.memoryTotalBytes).toBeGreaterThan(0);
    }
    const detail = await api(platform, 'GET', '/nodes/node-b', undefined, platform.adminKey);
    expect(detail.body).toMatchObject({ nodeID: 'node-b', status: 'ready', sandboxes: [], cachedBuilds: [] });
    expect(await api(platform, 'GET', '/nodes/node-z', undefined, platform.adminKey)).toMatchObject({ status: 404, body: { code: 404, message: 'node "node-z" not found' } });
    expect((await api(platform, 'GET', `/nodes/${encodeURIComponent('../etc')}`, undefined, platform.adminKey)).status).toBe(400);
    expect((await api(platform, 'GET', '/nodes', undefined, 'e2b_wrong')).status).toBe(401);
    expect((await api(platform, 'GET', '/nodes')).status).toBe(401); // a team's key: the node table is the operator's
  });

  it('creates spread over both nodes (clientID is the node) and SDK commands work on each', async () => {
    const created = await Promise.all(Array.from({ length: 4 }, (_, i) => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, metadata: { n: String(i) } })));
    sandboxes.push(...created);
    const nodes = await Promise.all(created.map((s) => clientIdOf(s.sandboxId)));
    expect(nodes.filter((n) => n === 'node-a')).toHaveLength(2);
    expect(nodes.filter((n) => n === 'node-b')).toHaveLength(2);
    // Booting node-b's sandboxes reached their envd (health, /init) through its dial.
    expect(dialsB.filter((d) => d.port === 49983).length).toBeGreaterThanOrEqual(4);
    for (const [i, sbx] of created.entries()) {
      const before = dialsB.length;
      expect((await sbx.commands.run('echo hi from $(hostname)')).stdout).toMatch(/^hi from sbx-/);
      await sbx.files.write('/tmp/where', nodes[i]!);
      expect(await sbx.files.read('/tmp/where')).toBe(nodes[i]);
      // The SDK's envd traffic through the proxy took node-b's dial for node-b's sandboxes.
      if (nodes[i] === 'node-b') expect(dialsB.length).toBeGreaterThan(before);
    }
    // ...and only for them: every stream through node-b's dial went to an address on node-b's own network.
    const subnet = String((await new Docker().getNetwork(NODE_B_NETWORK).inspect()).IPAM?.Config?.[0]?.Subnet);
    expect(subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    expect(dialsB.filter((d) => !inSubnet(d.address, subnet))).toEqual([]);
    const listed = (await api(platform, 'GET', '/v2/sandboxes')).body as Array<{ sandboxID: string; clientID: string }>;
    expect(Object.fromEntries(listed.map((s) => [s.sandboxID, s.clientID]))).toEqual(Object.fromEntries(created.map((s, i) => [s.sandboxId, nodes[i]])));
    const b = (await api(platform, 'GET', '/nodes/node-b', undefined, platform.adminKey)).body;
    expect(b).toMatchObject({ sandboxCount: 2, createSuccesses: 2 });
    expect(b.metrics.allocatedCPU).toBeGreaterThan(0);
  }, 300_000);

  it('proxied requests to a sandbox on node-b reuse pooled streams of its dial (no new tunnel per request)', async () => {
    let onB: Sandbox | undefined;
    for (const sbx of sandboxes) if (!onB && (await clientIdOf(sbx.sandboxId)) === 'node-b') onB = sbx;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = new URL(platform.url);
    const health = (): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = http.request({ host: url.hostname, port: url.port, path: '/health', agent, headers: { 'e2b-sandbox-id': onB!.sandboxId, 'e2b-sandbox-port': '49983' } }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode!));
        });
        req.once('error', reject);
        req.end();
      });
    expect(await health()).toBeLessThan(300);
    const address = platform.lifecycle.get(onB!.sandboxId)?.address;
    expect(address).toBeDefined();
    const before = dialsB.length;
    for (let i = 0; i < 20; i++) expect(await health()).toBeLessThan(300);
    agent.destroy();
    // Sequential requests on one client connection: one pooled upstream stream serves them all (a new one per request
    // before the pools). The platform's own metrics sampling (every 5 s, not pooled) may dial once meanwhile.
    expect(dialsB.slice(before).filter((d) => d.address === address).length).toBeLessThanOrEqual(2);
  });

  it('POST /nodes/{id} drains a node: nothing new is placed there, its sandboxes keep answering; ready undoes it; bad changes are refused', async () => {
    const admin = (method: string, path: string, body?: unknown) => api(platform, method, path, body, platform.adminKey);
    const onB: Sandbox[] = [];
    for (const sbx of sandboxes) if ((await clientIdOf(sbx.sandboxId)) === 'node-b') onB.push(sbx);
    expect(onB.length).toBeGreaterThan(0);
    expect((await admin('POST', '/nodes/node-b', { status: 'draining' })).status).toBe(204);
    expect((await admin('POST', '/nodes/node-b', { status: 'draining', clusterID: 'default' })).status).toBe(204); // already: no change
    expect((await admin('GET', '/nodes/node-b')).body.status).toBe('draining');
    expect(await platform.nodes.store.get('node-b')).toMatchObject({ status: 'draining' });
    const during = await Promise.all([0, 1, 2].map(() => Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 })));
    try {
      for (const sbx of during) expect(await clientIdOf(sbx.sandboxId)).toBe('node-a');
      // A drained node keeps serving what it runs: REST, proxy (SDK commands) and the node's detail.
      for (const sbx of onB) {
        expect((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200);
        expect((await sbx.commands.run('echo drained-but-here')).stdout.trim()).toBe('drained-but-here');
      }
      expect((await admin('GET', '/nodes/node-b')).body.sandboxCount).toBe(onB.length);
      // Only the operator's two statuses; a well-formed but platform-owned status is a 400, garbage too; unknown node 404.
      for (const body of [{ status: 'unhealthy' }, { status: 'connecting' }, { status: 'standby' }, { status: 'gone' }, {}, { status: 'ready', extra: 1 }, { status: 1 }]) {
        expect({ body, status: (await admin('POST', '/nodes/node-b', body)).status }).toEqual({ body, status: 400 });
      }
      expect((await admin('POST', '/nodes/node-z', { status: 'draining' })).status).toBe(404);
      expect((await admin('POST', '/nodes/node-b', { status: 'ready', clusterID: 'other' })).status).toBe(404);
      expect((await admin('POST', `/nodes/${encodeURIComponent('../etc')}`, { status: 'ready' })).status).toBe(400);
      expect((await admin('GET', '/nodes/node-b')).body.status).toBe('draining');
    } finally {
      await Promise.all(during.map((s) => s.kill()));
    }
    expect((await admin('POST', '/nodes/node-b', { status: 'ready' })).status).toBe(204);
    expect((await admin('GET', '/nodes/node-b')).body.status).toBe('ready');
    const after = await Promise.all([0, 1].map(() => Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 })));
    const placed = await Promise.all(after.map((s) => clientIdOf(s.sandboxId)));
    await Promise.all(after.map((s) => s.kill()));
    expect(placed).toContain('node-b'); // node-b holds fewer now: placeable again, it takes at least one
  }, 300_000);

  it('a sandbox stays on its node: paused to its filesystem and resumed there, forked there; one mounting a volume goes to the embedded node', async () => {
    let onB: Sandbox | undefined;
    for (const sbx of sandboxes) if ((await clientIdOf(sbx.sandboxId)) === 'node-b') onB = sbx;
    await onB!.files.write('/home/user/kept.txt', 'kept on node-b');
    const before = dialsB.length;
    await Sandbox.pause(onB!.sandboxId, { ...platform.sdk, keepMemory: false } as never);
    expect((await api(platform, 'GET', `/sandboxes/${onB!.sandboxId}`)).body).toMatchObject({ state: 'paused', clientID: 'node-b' });
    const resumed = await Sandbox.connect(onB!.sandboxId, { ...platform.sdk, timeoutMs: 300_000 });
    expect(await clientIdOf(onB!.sandboxId)).toBe('node-b');
    expect(await resumed.files.read('/home/user/kept.txt')).toBe('kept on node-b');
    expect(dialsB.length).toBeGreaterThan(before);

    const forks = await onB!.fork();
    try {
      for (const fork of forks as Sandbox[]) {
        expect(fork).toBeInstanceOf(Sandbox);
        expect(await clientIdOf(fork.sandboxId)).toBe('node-b');
        expect(await fork.files.read('/home/user/kept.txt')).toBe('kept on node-b');
      }
    } finally {
      for (const fork of forks) if (fork instanceof Sandbox) await fork.kill();
    }

    const volume = await Volume.create(`multinode${process.pid}`, platform.sdk);
    // Two at once over equally loaded nodes would spread; mounting a volume, both go to its node.
    const mounting = await Promise.all([0, 1].map(() => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, volumeMounts: { '/data': volume } } as never)));
    try {
      for (const sbx of mounting) {
        expect(await clientIdOf(sbx.sandboxId)).toBe('node-a');
        await sbx.files.write('/data/from', sbx.sandboxId);
      }
    } finally {
      for (const sbx of mounting) await sbx.kill();
      await Volume.destroy(volume.volumeId, platform.sdk).catch(() => undefined);
    }
  }, 300_000);

  it('a node that stops heartbeating is lost: its sandboxes 404 with the reason (REST, proxy, SDK), the others keep working, new creates avoid it', async () => {
    const onB: Sandbox[] = [];
    const onA: Sandbox[] = [];
    for (const sbx of sandboxes) ((await clientIdOf(sbx.sandboxId)) === 'node-b' ? onB : onA).push(sbx);
    platform.nodes.agents.get('node-b')!.stop();
    await until('node-b marked lost', async () => (await api(platform, 'GET', '/nodes/node-b', undefined, platform.adminKey)).body.status === 'unhealthy');
    // A lost node's status is the heartbeats' to decide: neither drained nor undrained by a request.
    for (const status of ['draining', 'ready']) {
      expect(await api(platform, 'POST', '/nodes/node-b', { status }, platform.adminKey)).toMatchObject({ status: 409, body: { code: 409, message: `node "node-b" is unhealthy: only a ready or draining node can be set ${status}` } });
    }

    for (const sbx of onB) {
      const rest = await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`);
      expect(rest.status).toBe(404);
      expect(rest.body).toEqual({ code: 404, message: `Sandbox "${sbx.sandboxId}" is not available: its node "node-b" was lost (no heartbeat for more than 3 s)` });
      const proxied = await throughProxy(sbx.sandboxId);
      expect(proxied.status).toBe(404);
      expect(await proxied.json()).toMatchObject({ sandboxId: sbx.sandboxId, code: 404, message: expect.stringContaining('node "node-b" was lost') });
      await expect(sbx.commands.run('echo no')).rejects.toThrow();
      expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`)).status).toBe(404);
    }
    const listed = ((await api(platform, 'GET', '/v2/sandboxes')).body as Array<{ sandboxID: string }>).map((s) => s.sandboxID).sort();
    expect(listed).toEqual(onA.map((s) => s.sandboxId).sort());
    for (const sbx of onA) expect((await sbx.commands.run('echo still here')).stdout.trim()).toBe('still here');

    const fresh = await Promise.all([0, 1].map(() => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 })));
    sandboxes.push(...fresh);
    for (const sbx of fresh) {
      expect(await clientIdOf(sbx.sandboxId)).toBe('node-a');
      expect((await sbx.commands.run('echo new')).stdout.trim()).toBe('new');
    }
  }, 300_000);

  it('a lost node that heartbeats again is reconciled: its sandboxes answer again, a container no record names is removed', async () => {
    const stray = await runtimeB.startContainer({ sandboxId: 'istrayforgottenbyplatform', templateId: 'base', image: platform.config.baseImage, cpuCount: 1, memoryMB: 256, envdAccessToken: 'stray-token' });
    const agent = platform.nodes.agents.get('node-b')!;
    await agent.beat();
    await agent.start(1_000);
    await until('node-b ready again', async () => (await api(platform, 'GET', '/nodes/node-b', undefined, platform.adminKey)).body.status === 'ready');
    await until('stray container removed', async () => (await runtimeB.inspect(stray.containerId)).status === 'missing' || (await runtimeB.inspect(stray.containerId)).status === 'stopped');
    for (const sbx of sandboxes) {
      expect((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).status).toBe(200);
      expect((await sbx.commands.run('echo back')).stdout.trim()).toBe('back');
    }
    expect((await api(platform, 'GET', '/nodes/node-b', undefined, platform.adminKey)).body.sandboxCount).toBe(2);
    await Promise.all(sandboxes.map((s) => s.kill()));
    expect((await api(platform, 'GET', '/v2/sandboxes')).body).toEqual([]);
  }, 300_000);
});
