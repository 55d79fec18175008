/**
 * The three-node local cluster (issue 17's Tests) with the published e2b SDK: one `upCluster` for the whole file —
 * three node engines with their agents in network namespaces on 198.19.<slot>.0/24, the cluster's PostgreSQL on
 * the bridge address (the replicas find the agents through TIDEPOOL_NODES, say Hello and write their rows: the agents
 * hold no database settings), and two `tidepool api` replicas on loopback ports driving the agents over mutual TLS — and `down` at the end (also when a case fails).
 *
 * - creates through both replicas spread over all three nodes (`clientID`, `GET /nodes`), never on the replicas'
 *   drained embedded nodes;
 * - commands, files, a PTY and `getHost` traffic through each replica to sandboxes on every node;
 * - a node stopped mid-run: lost after TIDEPOOL_NODE_LOST_AFTER_SECONDS, its sandboxes answer 404 with the reason on
 *   both replicas, the others keep working, new creates avoid it.
 *
 * Also: a sandbox used through the replica that did not create it, a replica killed mid-burst, and images moving
 * between nodes through the cluster's registry: a template built on one node (through its agent) started on all
 * three, a snapshot forked onto another node, a disk-paused sandbox resumed elsewhere after its node is stopped.
 * Last, `down` itself: nothing of the cluster (processes of the database and the replicas included) is left.
 * Root only (namespaces, engines, iptables).
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Sandbox, Template } from 'e2b';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BASE_IMAGE,
  apiFiles,
  clusterLayout,
  clusterLeftovers,
  replicaSandboxNetwork,
  run,
  downCluster,
  ensureBaseImage,
  freeClusterSlot,
  SANDBOX_DOMAIN,
  stopApiReplica,
  stopClusterNode,
  upCluster,
  type ClusterState,
} from '@tidepool/testkit';
import type { TestPlatform } from './support/start-platform.ts';
import { rawGet } from './support/template-testing.ts';

const isRoot = process.getuid?.() === 0;
const NODES = ['node1', 'node2', 'node3'];
const LOST_AFTER_SECONDS = 6;
const name = `s${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-sdk-test-'));
let state: ClusterState | undefined;
let downDone = false;
/** Every sandbox made, with the replica (0 or 1) that made it. */
const made: { sandbox: Sandbox; replica: number }[] = [];
/** Sandboxes running a web server on port 8000 (serving /tmp/www). */
const serving = new Set<string>();

async function serveWww(sandbox: Sandbox): Promise<void> {
  if (serving.has(sandbox.sandboxId)) return;
  await sandbox.commands.run('mkdir -p /tmp/www && cd /tmp/www && python3 -m http.server 8000 --bind 0.0.0.0', { background: true });
  serving.add(sandbox.sandboxId);
}


/** SDK connection options for replica 0 or 1: API and envd traffic to its listener, getHost names under the domain. */
function replica(index: number): { apiKey: string; apiUrl: string; sandboxUrl: string; domain: string; requestTimeoutMs: number } {
  const url = state!.apis![index].url;
  return { apiKey: state!.apiKey!, apiUrl: url, sandboxUrl: url, domain: SANDBOX_DOMAIN, requestTimeoutMs: 120_000 };
}

/** A REST call to replica 0 or 1 with the API key (the admin key for `/nodes`). */
async function rest(index: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const key = path.startsWith('/nodes') ? state!.adminKey! : state!.apiKey!;
  const response = await fetch(`${state!.apis![index].url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

const nodeOf = async (replicaIndex: number, sandboxId: string): Promise<string> => (await rest(replicaIndex, 'GET', `/sandboxes/${sandboxId}`)).body.clientID;

/** A plain GET to a replica with the given Host (what `http://${sbx.getHost(port)}` resolves to). */
const viaHost = (index: number, host: string, path: string): Promise<{ status: number; body: string }> =>
  rawGet({ url: state!.apis![index].url } as TestPlatform, path, { host });

async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function create(index: number, template = 'base'): Promise<Sandbox> {
  const sandbox = await Sandbox.create(template, { ...replica(index), timeoutMs: 600_000 });
  made.push({ sandbox, replica: index });
  return sandbox;
}

describe.skipIf(!isRoot)('three-node local cluster: the e2b SDK through two API replicas', () => {
  beforeAll(async () => {
    await ensureBaseImage();
    const slot = await freeClusterSlot();
    // Template builds on the nodes need the envd runtime image there too.
    const images = [BASE_IMAGE, 'tidepool/envd-runtime:latest'];
    state = await upCluster({ name, slot, dir, nodes: 3, images, postgres: true, apis: 2, nodeLostAfterSeconds: LOST_AFTER_SECONDS });
  }, 900_000);

  afterAll(async () => {
    if (!downDone) await downCluster({ name, dir }).catch((error: unknown) => process.stderr.write(`[cluster-sdk] down failed: ${String(error)}\n`));
    rmSync(dir, { recursive: true, force: true });
  }, 600_000);

  it('the cluster\'s PostgreSQL: the agents and replicas are in its node table; only the password gets in, as no superuser', async () => {
    const url = new URL(state!.postgres!.url);
    const connection = { host: url.hostname, port: Number(url.port), user: url.username, database: url.pathname.slice(1) };
    const client = new pg.Client({ ...connection, password: readFileSync(state!.postgres!.passwordFile, 'utf8').trim() });
    await client.connect();
    try {
      const rows = (await client.query<{ node_id: string; status: string }>('SELECT node_id, status FROM nodes ORDER BY node_id')).rows;
      expect(rows.filter((r) => NODES.includes(r.node_id))).toEqual(NODES.map((id) => ({ node_id: id, status: 'ready' })));
      // A replica with an engine of its own registers it as api<i>: drained, so only agents take sandboxes.
      for (const row of rows.filter((r) => !NODES.includes(r.node_id))) expect(row).toEqual({ node_id: expect.stringMatching(/^api[12]$/), status: 'draining' });
      // Each agent's row is bound to the certificate it presented at the replicas' Hello.
      const identities = (await client.query<{ node_id: string; identity: string }>('SELECT node_id, identity FROM nodes')).rows.filter((r) => NODES.includes(r.node_id));
      for (const row of identities) expect(row.identity).toBe(new X509Certificate(readFileSync(join(dirname(state!.tls!.ca), `${row.node_id}-server.pem`))).fingerprint256);
      // The replicas' role is no superuser: no password hashes, no roles.
      await expect(client.query('SELECT rolpassword FROM pg_authid')).rejects.toThrow(/permission denied/);
      await expect(client.query('CREATE ROLE intruder LOGIN')).rejects.toThrow(/permission denied/);
      // and no token seed in the database, only its check value
      expect((await client.query<{ key: string }>("SELECT key FROM settings WHERE key LIKE 'token_seed%'")).rows.map((r) => r.key)).toEqual(['token_seed_check']);
    } finally {
      await client.end();
    }
    const intruder = new pg.Client({ ...connection, password: 'not-the-password' });
    intruder.on('error', () => undefined);
    await expect(intruder.connect()).rejects.toThrow(/password authentication failed/);
    await intruder.end().catch(() => undefined);
  });

  it('creates through both replicas spread over all three nodes (clientID, GET /nodes), none on the drained embedded nodes', async () => {
    const sandboxes = await Promise.all([0, 0, 0, 0, 0, 0, 1, 1, 1].map((index) => create(index)));
    const placed = await Promise.all(made.map(async ({ sandbox, replica: index }) => ({ index, nodeId: await nodeOf(index, sandbox.sandboxId) })));
    expect(sandboxes).toHaveLength(9);
    expect(new Set(placed.map((p) => p.nodeId))).toEqual(new Set(NODES));
    for (const index of [0, 1]) {
      const nodes = await rest(index, 'GET', '/nodes');
      expect(nodes.status).toBe(200);
      const byId = new Map((nodes.body as { nodeID: string; status: string; sandboxCount: number }[]).map((n) => [n.nodeID, n]));
      for (const id of NODES) {
        expect(byId.get(id)?.status).toBe('ready');
        // Every replica counts every sandbox (replicas share their state through the database).
        const counted = placed.filter((p) => p.nodeId === id);
        expect(byId.get(id)?.sandboxCount).toBe(counted.length);
      }
      for (const id of ['api1', 'api2']) if (byId.has(id)) expect(byId.get(id)?.status).toBe('draining');
    }
    const detail = await rest(0, 'GET', '/nodes/node1');
    expect(detail.status).toBe(200);
    expect(detail.body.cachedBuilds).toContain(BASE_IMAGE);
  }, 600_000);

  it('commands, files, a PTY and getHost traffic through each replica to sandboxes on every node', async () => {
    const covered = new Set<string>();
    for (const { sandbox, replica: index } of made) {
      const nodeId = await nodeOf(index, sandbox.sandboxId);
      const key = `${index}/${nodeId}`;
      if (covered.has(key)) continue;
      covered.add(key);
      const result = await sandbox.commands.run(`echo on-${nodeId} && id -un`);
      expect(result.stdout).toBe(`on-${nodeId}\nuser\n`);
      await sandbox.files.write('/tmp/www/index.html', `page of ${sandbox.sandboxId} on ${nodeId}`);
      expect(await sandbox.files.read('/tmp/www/index.html')).toBe(`page of ${sandbox.sandboxId} on ${nodeId}`);
      let output = '';
      const pty = await sandbox.pty.create({ cols: 80, rows: 24, onData: (d) => void (output += Buffer.from(d).toString()), timeoutMs: 0 });
      await sandbox.pty.sendInput(pty.pid, new TextEncoder().encode('echo pty-$((40+2)); exit\n'));
      await pty.wait().catch(() => undefined);
      expect(output).toContain('pty-42');
      await serveWww(sandbox);
      const host = sandbox.getHost(8000);
      expect(host).toBe(`8000-${sandbox.sandboxId}.${SANDBOX_DOMAIN}`);
      const page = await until('the sandbox web server answers through the replica', async () => {
        const answer = await viaHost(index, host, '/index.html');
        return answer.status === 200 && answer;
      });
      expect(page.body).toBe(`page of ${sandbox.sandboxId} on ${nodeId}`);
    }
    // Replica 1 placed six sandboxes (all three nodes, as the first case proved), replica 2 three.
    for (const id of NODES) expect(covered.has(`0/${id}`)).toBe(true);
    expect([...covered].some((k) => k.startsWith('1/'))).toBe(true);
  }, 600_000);

  it('a sandbox created through one replica is served by the other (REST, commands, files, getHost)', async () => {
    for (const { sandbox, replica: index } of made.slice(0, 4)) {
      const other = 1 - index;
      expect((await rest(other, 'GET', `/sandboxes/${sandbox.sandboxId}`)).status).toBe(200);
      const there = await Sandbox.connect(sandbox.sandboxId, replica(other));
      expect((await there.commands.run('echo across')).stdout).toBe('across\n');
      await there.files.write('/tmp/www/across.txt', 'written through the other replica');
      expect(await sandbox.files.read('/tmp/www/across.txt')).toBe('written through the other replica');
      await serveWww(sandbox);
      await until('the sandbox web server answers through the other replica', async () => (await viaHost(other, sandbox.getHost(8000), '/across.txt')).status === 200);
    }
  }, 300_000);

  it('a template built on one node starts on the others', async () => {
    // /etc is root's: the step runs as root (RUN steps run as `user` by default, as in E2B).
    const template = Template().fromTemplate('base').runCmd('echo built-in-cluster > /etc/cluster-mark', { user: 'root' });
    const alias = `cluster-mark-${name}`;
    await Template.build(template, alias, { ...replica(0) });
    const sandboxes = await Promise.all([0, 1, 2, 3, 4, 5].map(() => create(0, alias)));
    const nodes = await Promise.all(sandboxes.map((s) => nodeOf(0, s.sandboxId)));
    expect(new Set(nodes)).toEqual(new Set(NODES));
    for (const sandbox of sandboxes) expect((await sandbox.commands.run('cat /etc/cluster-mark')).stdout).toBe('built-in-cluster\n');
  }, 900_000);

  it('a snapshot taken on one node forks onto another', async () => {
    const source = await create(0);
    const sourceNode = await nodeOf(0, source.sandboxId);
    await source.files.write('/home/user/snap.txt', 'from the snapshot');
    const snapshot = await source.createSnapshot();
    const forks = await Promise.all([0, 1, 2, 3].map(() => create(0, snapshot.snapshotId)));
    const nodes = await Promise.all(forks.map((s) => nodeOf(0, s.sandboxId)));
    expect(nodes.some((n) => n !== sourceNode)).toBe(true);
    for (const fork of forks) expect(await fork.files.read('/home/user/snap.txt')).toBe('from the snapshot');
  }, 900_000);

  it('a node stopped mid-run: its sandboxes 404 with the reason on both replicas, the others work, new creates avoid it', async () => {
    const lostNode = 'node2';
    const placed = await Promise.all(made.map(async (m) => ({ ...m, nodeId: await nodeOf(m.replica, m.sandbox.sandboxId) })));
    expect(placed.some((p) => p.nodeId === lostNode)).toBe(true);
    // A command runs on a survivor while the node goes.
    const survivor = placed.find((p) => p.nodeId !== lostNode)!;
    const running = survivor.sandbox.commands.run('sleep 8 && echo survived');
    await stopClusterNode(dir, lostNode);
    expect((await running).stdout).toBe('survived\n');
    for (const index of [0, 1]) {
      await until(`replica ${index + 1} marks ${lostNode} lost`, async () => {
        const node = await rest(index, 'GET', `/nodes/${lostNode}`);
        return node.body?.status === 'unhealthy';
      }, (LOST_AFTER_SECONDS + 30) * 1000);
    }
    for (const { sandbox, replica: index, nodeId } of placed) {
      const answer = await rest(index, 'GET', `/sandboxes/${sandbox.sandboxId}`);
      if (nodeId === lostNode) {
        expect(answer.status).toBe(404);
        expect(answer.body.message).toMatch(new RegExp(`node "${lostNode}" was lost`));
        await expect(sandbox.commands.run('true')).rejects.toThrow();
      } else {
        expect(answer.status).toBe(200);
        expect((await sandbox.commands.run('echo still-here')).stdout).toBe('still-here\n');
      }
    }
    const later = await Promise.all([0, 0, 0, 1, 1, 1].map((index) => create(index)));
    for (const [i, sandbox] of later.entries()) {
      const nodeId = await nodeOf(i < 3 ? 0 : 1, sandbox.sandboxId);
      expect(nodeId).not.toBe(lostNode);
      expect(NODES).toContain(nodeId);
      expect((await sandbox.commands.run('echo fresh')).stdout).toBe('fresh\n');
    }
  }, 600_000);

  it('a replica killed during a burst of creates: none lost, none doubled', async () => {
    const listed = async (): Promise<string[]> => ((await rest(0, 'GET', '/v2/sandboxes')).body as { sandboxID: string }[]).map((s) => s.sandboxID);
    const before = new Set(await listed());
    const burst = Array.from({ length: 10 }, (_, i) => create(i % 2).then((s) => s.sandboxId, (error: unknown) => error as Error));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await stopApiReplica(apiFiles({ dir }, 2), { kill: true }); // api2, the SDK's replica(1)
    const outcomes = await Promise.all(burst);
    const answered = outcomes.filter((o): o is string => typeof o === 'string');
    // What the surviving replica lists once it has cleaned up after the dead one.
    const after = await until('the survivor settles the dead replica\'s creates', async () => {
      const first = (await listed()).filter((id) => !before.has(id));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const second = (await listed()).filter((id) => !before.has(id));
      return first.length === second.length && second;
    });
    // Every create that was answered exists exactly once; nothing is listed twice.
    for (const id of answered) expect(after.filter((l) => l === id)).toHaveLength(1);
    expect(new Set(after).size).toBe(after.length);
    for (const id of after) expect((await rest(0, 'GET', `/sandboxes/${id}`)).status).toBe(200);
  }, 300_000);

  it('a disk-paused sandbox resumes on another node after its node is stopped', async () => {
    const sandbox = await create(0);
    const nodeId = await nodeOf(0, sandbox.sandboxId);
    await sandbox.files.write('/home/user/paused.txt', 'kept on disk');
    // A filesystem pause commits the sandbox to an image (pushed to the registry), so any node can resume it.
    expect((await rest(0, 'POST', `/sandboxes/${sandbox.sandboxId}/pause`, { memory: false })).status).toBe(204);
    await stopClusterNode(dir, nodeId);
    const resumed = await Sandbox.connect(sandbox.sandboxId, replica(0));
    const resumedOn = await nodeOf(0, sandbox.sandboxId);
    expect(resumedOn).not.toBe(nodeId);
    expect(await resumed.files.read('/home/user/paused.txt')).toBe('kept on disk');
  }, 600_000);

  it('down removes everything: nodes, database, replicas, their host network; no process, namespace, link, mount or rule left', async () => {
    const report = await downCluster({ name, dir });
    downDone = true;
    expect(report.leftovers).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    expect(await clusterLeftovers(clusterLayout(name, state!.slot, dir))).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    expect((await run('docker', ['network', 'inspect', replicaSandboxNetwork(clusterLayout(name, state!.slot, dir))])).exitCode).not.toBe(0);
  }, 600_000);
});
