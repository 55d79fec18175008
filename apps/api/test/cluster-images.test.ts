/**
 * Images across machines through the registry, end to end: an API with TIDEPOOL_REGISTRY drives the two node
 * agents of a local cluster (engines in network namespaces on 198.19.<slot>.0/24, the cluster's own registry with
 * htpasswd on the bridge address); its embedded node (the host's engine) is set `draining`, so every sandbox goes
 * to a cluster node. With the published e2b SDK: a snapshot taken on one node is pushed to the registry and a
 * sandbox created from it on the other node (which pulls it) has the source's files; a filesystem-paused sandbox
 * resumes on the other node after its own node's engine and agent are stopped; deleting the snapshot removes its
 * registry tag; a template built on one node through its agent starts on the other. Hostile parts: a node refuses
 * names outside its registry prefix; with the registry down a snapshot and a build fail with a clear error and leave
 * no row or image behind; the registry password is in no agent log. The agents' rows are heartbeated by this test
 * (as in cluster-mode.test.ts). Needs root.
 * CLUSTER_TEST_LOG=info shows the API's log.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, SandboxError, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_IMAGE, agentFiles, clusterLayout, downCluster, freeClusterSlot, nodeLayout, stopClusterNode, stopRegistryIn, upCluster, type ClusterState } from '@tidepool/testkit';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const isRoot = process.getuid?.() === 0;
const RUNTIME_IMAGE = 'tidepool/envd-runtime:latest';
const name = `i${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-images-test-'));
let state: ClusterState | undefined;
let platform: TestPlatform | undefined;
const probes = new Map<string, RemoteNode>();
const beating = new Map<string, NodeJS.Timeout>();
const sandboxes: Sandbox[] = [];

async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** SDK options with room for commits and pushes of a 500 MB image on a loaded 2-core machine. */
const sdk = () => ({ ...platform!.sdk, requestTimeoutMs: 600_000 });
const clientIdOf = async (id: string): Promise<string> => (await api(platform!, 'GET', `/sandboxes/${id}`)).body.clientID;
const otherNode = (nodeId: string): string => state!.nodes.map((n) => n.id).find((id) => id !== nodeId)!;

/** Sets a node `draining` (out of placement) or back `ready` while `work` runs, and then as it was. */
async function whileNode<T>(nodeId: string, status: 'draining' | 'ready', work: () => Promise<T>): Promise<T> {
  const store = platform!.nodes.store;
  const was = status === 'draining' ? 'ready' : 'draining';
  await store.transition(nodeId, was, status);
  platform!.nodes.set.setStatus(nodeId, status);
  try {
    return await work();
  } finally {
    if (await store.transition(nodeId, status, was)) platform!.nodes.set.setStatus(nodeId, was);
  }
}

/** Keeps a node out of placement (`draining`) while `work` runs. */
const avoiding = <T>(nodeId: string, work: () => Promise<T>): Promise<T> => whileNode(nodeId, 'draining', work);

/** The manifest of a registry reference: its HTTP status (200 present, 404 gone). */
async function manifestStatus(reference: string): Promise<number> {
  const { host, username, password } = state!.registry;
  const [repository, tag] = reference.slice(host.length + 1).split(':');
  const response = await fetch(`http://${host}/v2/${repository}/manifests/${tag}`, {
    method: 'HEAD',
    headers: { authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`, accept: 'application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json' },
  });
  return response.status;
}

/** Every image name on each cluster node (what its agent reports). */
async function nodeTags(): Promise<Record<string, string[]>> {
  const entries = await Promise.all([...probes].map(async ([nodeId, probe]) => [nodeId, (await probe.capacity()).images ?? []] as const));
  return Object.fromEntries(entries);
}

/** The names each reachable node has in `after` and not in `before` (sorted). */
function newTags(before: Record<string, string[]>, after: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(after).map(([nodeId, tags]) => [nodeId, tags.filter((tag) => !(before[nodeId] ?? []).includes(tag)).sort()]));
}

describe.skipIf(!isRoot)('cluster images: templates, snapshots and paused sandboxes move through the registry', () => {
  beforeAll(async () => {
    const slot = await freeClusterSlot();
    state = await upCluster({ name, slot, dir, nodes: 2, images: [BASE_IMAGE, RUNTIME_IMAGE] });
    const tls = state.tls!;
    const passwordFile = join(dir, 'api-registry-password');
    writeFileSync(passwordFile, `${state.registry.password}\n`, { mode: 0o600 });
    platform = await startTestPlatform({
      logLevel: (process.env.CLUSTER_TEST_LOG as 'info' | undefined) ?? 'silent',
      nodeId: 'api-node',
      nodeLostAfterSeconds: 3,
      clusterClientCert: tls.cert,
      clusterClientKey: tls.key,
      clusterCa: tls.ca,
      registry: state.registry.host,
      registryUsername: state.registry.username,
      registryPasswordFile: passwordFile,
      registryInsecure: true,
    });
    const store = platform.nodes.store;
    // The host's engine cannot reach the cluster registry over plain HTTP: sandboxes go to the cluster's nodes.
    await store.transition('api-node', 'ready', 'draining');
    for (const node of state.nodes) {
      const probe = connectRemoteNode({ nodeId: node.id, url: node.agentUrl!, tls: { ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) } });
      probes.set(node.id, probe);
      await store.register({ nodeId: node.id, url: node.agentUrl!, version: 'agent', capacity: await probe.capacity() });
      const beat = async (): Promise<void> => {
        // A stopped node's capacity call fails as well as the heartbeat: both are caught (a beat never rejects).
        await probe.capacity().then((capacity) => store.heartbeat(node.id, capacity)).catch(() => undefined);
        if (beating.has(node.id)) beating.set(node.id, setTimeout(() => void beat(), 500));
      };
      beating.set(node.id, setTimeout(() => void beat(), 0));
    }
    await until('the API drives both agents', async () => state!.nodes.every((n) => platform!.nodes.set.status(n.id) === 'ready') && platform!.nodes.set.status('api-node') === 'draining');
  }, 900_000);

  afterAll(async () => {
    for (const timer of beating.values()) clearTimeout(timer);
    beating.clear();
    for (const sandbox of sandboxes) await sandbox.kill().catch(() => undefined);
    for (const probe of probes.values()) probe.close();
    await platform?.dispose();
    if (state) await downCluster({ name, dir }).catch((error: unknown) => process.stderr.write(`[cluster-images] down failed: ${String(error)}\n`));
    rmSync(dir, { recursive: true, force: true });
  }, 600_000);

  it('a template built on one node (through its agent) is pushed and starts on the other node', async () => {
    const context = join(dir, 'context');
    mkdirSync(context, { recursive: true });
    writeFileSync(join(context, 'hello.txt'), 'hello from the build context');
    const name = `tp-cluster-${process.pid}`;
    const template = Template({ fileContextPath: context }).fromTemplate('base').copy('hello.txt', '/opt/hello.txt').runCmd('echo built-on-$(hostname) > /opt/built.txt', { user: 'root' });
    const started = Date.now();
    await Template.build(template, name, sdk());
    const buildMs = Date.now() - started;
    const tagged = async (nodeId: string) => (await probes.get(nodeId)!.capacity()).images!.find((tag) => tag.startsWith(`${state!.registry.host}/template:`));
    const builtOn = (await Promise.all(state!.nodes.map(async (n) => ((await tagged(n.id)) ? n.id : undefined)))).filter(Boolean) as string[];
    expect(builtOn).toHaveLength(1);
    const reference = (await tagged(builtOn[0]))!;
    expect(await manifestStatus(reference)).toBe(200);
    const createStarted = Date.now();
    const sandbox = await avoiding(builtOn[0], () => Sandbox.create(name, { ...sdk(), timeoutMs: 600_000 }));
    const createMs = Date.now() - createStarted;
    sandboxes.push(sandbox);
    expect(await clientIdOf(sandbox.sandboxId)).toBe(otherNode(builtOn[0]));
    expect(await sandbox.files.read('/opt/hello.txt')).toBe('hello from the build context');
    expect(await sandbox.files.read('/opt/built.txt')).toMatch(/^built-on-/);
    process.stdout.write(`[cluster-images] build on ${builtOn[0]} (with push) ${buildMs} ms; create on the other node (pull + start) ${createMs} ms\n`);
    await sandbox.kill();
    const templateId = (await api(platform!, 'GET', `/templates/aliases/${name}`)).body?.templateID ?? name;
    expect((await api(platform!, 'DELETE', `/templates/${templateId}`)).status).toBeLessThan(300);
    expect(await manifestStatus(reference)).toBe(404);
  }, 900_000);

  it('a snapshot taken on one node is pushed and starts on the other, which pulls it; deleting it removes its tag', async () => {
    const source = await Sandbox.create({ ...sdk(), timeoutMs: 600_000 });
    sandboxes.push(source);
    const sourceNode = await clientIdOf(source.sandboxId);
    await source.files.write('/home/user/made-on.txt', `made on ${sourceNode}`);
    const started = Date.now();
    const snapshot = await source.createSnapshot({ requestTimeoutMs: 600_000 });
    const snapshotMs = Date.now() - started;
    // Measured on its own: the other node pulls the pushed snapshot (the create below then finds it there).
    const pushed = (await probes.get(sourceNode)!.capacity()).images!.find((tag) => tag.startsWith(`${state!.registry.host}/snapshot:`));
    expect(pushed, `the pushed snapshot on ${sourceNode}`).toBeTruthy();
    const pullStarted = Date.now();
    await probes.get(otherNode(sourceNode))!.runtime.pullImage(pushed!);
    const pullMs = Date.now() - pullStarted;
    const createStarted = Date.now();
    const forked = await avoiding(sourceNode, () => Sandbox.create(snapshot.snapshotId, { ...sdk(), timeoutMs: 600_000 }));
    const createMs = Date.now() - createStarted;
    sandboxes.push(forked);
    const forkNode = await clientIdOf(forked.sandboxId);
    expect(forkNode).toBe(otherNode(sourceNode));
    expect(await forked.files.read('/home/user/made-on.txt')).toBe(`made on ${sourceNode}`);
    const reference = pushed!;
    expect(await manifestStatus(reference)).toBe(200);
    process.stdout.write(`[cluster-images] snapshot (commit + push) ${snapshotMs} ms; pull on the other node ${pullMs} ms; create there ${createMs} ms\n`);
    await forked.kill();
    await Sandbox.deleteSnapshot(snapshot.snapshotId, sdk());
    expect(await manifestStatus(reference)).toBe(404);
  }, 600_000);

  it("a fork of a sandbox whose node is drained starts on the other node with the source's files; the checkpoint leaves no name behind", async () => {
    const source = await Sandbox.create({ ...sdk(), timeoutMs: 600_000 });
    sandboxes.push(source);
    const sourceNode = await clientIdOf(source.sandboxId);
    const target = otherNode(sourceNode);
    await source.files.write('/home/user/forked-from.txt', `written on ${sourceNode}`);
    const tagsBefore = await nodeTags();
    const started = Date.now();
    // Two forks: one push from the source's node, one pull on the other (checked in fork-checkpoint.test.ts).
    const forks = await avoiding(sourceNode, () => Sandbox.fork(source.sandboxId, { ...sdk(), count: 2, timeoutMs: 600_000 }));
    const forkMs = Date.now() - started;
    const made = forks.map((fork) => {
      if (!(fork instanceof Sandbox)) throw fork;
      sandboxes.push(fork);
      return fork;
    });
    expect(made).toHaveLength(2);
    for (const fork of made) {
      expect(await clientIdOf(fork.sandboxId)).toBe(target);
      expect(await fork.files.read('/home/user/forked-from.txt')).toBe(`written on ${sourceNode}`);
    }
    // The source still runs on its node, and with room there a fork stays on it (the preferred node: no push, no pull).
    expect(await clientIdOf(source.sandboxId)).toBe(sourceNode);
    const localStarted = Date.now();
    const [local] = await source.fork({ ...sdk(), timeoutMs: 600_000 });
    const localMs = Date.now() - localStarted;
    if (!(local instanceof Sandbox)) throw local;
    sandboxes.push(local);
    expect(await clientIdOf(local.sandboxId)).toBe(sourceNode);
    // Only the forks' own images are new (named as theirs, on their nodes): no checkpoint name and no registry name.
    const tagsAfter = await nodeTags();
    expect(newTags(tagsBefore, tagsAfter)).toEqual({
      [sourceNode]: [`tidepool/paused:${local.sandboxId}`],
      [target]: made.map((fork) => `tidepool/paused:${fork.sandboxId}`).sort(),
    });
    process.stdout.write(`[cluster-images] 2 forks on the other node (commit + push + pull + 2 starts) ${forkMs} ms; 1 fork on the source's node (commit + start) ${localMs} ms\n`);
    for (const sandbox of [...made, local, source]) await sandbox.kill();
    expect(newTags(tagsBefore, await nodeTags())).toEqual({ [sourceNode]: [], [target]: [] });
  }, 600_000);

  it('a filesystem-paused sandbox resumes on the other node after its own node is stopped', async () => {
    const sandbox = await Sandbox.create({ ...sdk(), timeoutMs: 600_000 });
    sandboxes.push(sandbox);
    const first = await clientIdOf(sandbox.sandboxId);
    await sandbox.files.write('/home/user/kept.txt', 'across machines');
    const paused = await api(platform!, 'POST', `/sandboxes/${sandbox.sandboxId}/pause`, { memory: false });
    expect(paused.status).toBe(204);
    const record = platform!.lifecycle.get(sandbox.sandboxId)!;
    expect(record.pausedImage).toBe(`${state!.registry.host}/sandbox:${sandbox.sandboxId}`);
    expect(await manifestStatus(record.pausedImage!)).toBe(200);
    // Its node goes away: engine and agent stopped, no more heartbeats.
    clearTimeout(beating.get(first));
    beating.delete(first);
    await stopClusterNode(dir, first);
    await until('the stopped node is lost', async () => platform!.nodes.set.status(first) === 'lost', 30_000);
    const resumed = await Sandbox.connect(sandbox.sandboxId, { ...sdk(), timeoutMs: 600_000 });
    expect(await clientIdOf(sandbox.sandboxId)).toBe(otherNode(first));
    expect(await resumed.files.read('/home/user/kept.txt')).toBe('across machines');
    expect((await resumed.commands.run('echo alive')).stdout).toContain('alive');
    // Resumed, its registry copy is no longer needed.
    expect(await manifestStatus(`${state!.registry.host}/sandbox:${sandbox.sandboxId}`)).toBe(404);
  }, 600_000);

  it('a node refuses to push or pull a name outside its registry prefix', async () => {
    // A node still up (the test before stopped the one its sandbox was placed on).
    const probe = probes.get(state!.nodes.find((n) => platform!.nodes.set.status(n.id) === 'ready')!.id)!;
    await expect(probe.runtime.pullImage('docker.io/library/busybox:latest')).rejects.toThrow(/is neither an image of this platform's registry .* nor one of its node images/);
    await expect(probe.runtime.pullImage(`${state!.registry.host}/other-repository:x`)).rejects.toThrow(/is neither an image of this platform's registry .* nor one of its node images/);
    await expect(probe.runtime.pushImage(BASE_IMAGE, 'base:latest')).rejects.toThrow(/bad_call|pushImage/);
    await expect(probe.runtime.pushImage(BASE_IMAGE, '../template:x')).rejects.toThrow(/bad_call|pushImage/);
  });

  // Last: the registry stays down (down removes the cluster anyway).
  it('with the registry down, a snapshot and a build fail with a clear error and leave nothing behind', async () => {
    await stopRegistryIn(clusterLayout(name, state!.slot, dir).registryDir);
    const source = await Sandbox.create({ ...sdk(), timeoutMs: 600_000 });
    sandboxes.push(source);
    const sourceNode = await clientIdOf(source.sandboxId);
    const imagesBefore = (await probes.get(sourceNode)!.capacity()).images ?? [];
    const failed = await source.createSnapshot({ requestTimeoutMs: 600_000 }).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failed, 'the snapshot must fail').toBeInstanceOf(Error);
    expect(failed!.message).toMatch(/could not be pushed to the registry/);
    // No snapshot row, and no image left on the node (neither its local name nor its registry name).
    expect((await api(platform!, 'GET', `/snapshots?sandboxID=${source.sandboxId}`)).body).toEqual([]);
    const imagesAfter = (await probes.get(sourceNode)!.capacity()).images ?? [];
    expect(imagesAfter.filter((tag) => !imagesBefore.includes(tag))).toEqual([]);

    // A fork with room on its source's node needs no registry: it starts there. Placed on another node (the source's
    // drained, the embedded node the only ready one) its checkpoint cannot be pushed: a 500 for that fork with the
    // reason, and nothing made on any node (no record, no container, no image name).
    const [stayed] = await Sandbox.fork(source.sandboxId, { ...sdk(), timeoutMs: 600_000 });
    if (!(stayed instanceof Sandbox)) throw stayed;
    sandboxes.push(stayed);
    expect(await clientIdOf(stayed.sandboxId)).toBe(sourceNode);
    await stayed.kill();
    const recordsBefore = platform!.lifecycle.list().length;
    const embedded = platform!.nodes.set.runtime('api-node');
    const embeddedContainers = (await embedded.listManaged()).length;
    const sourceTags = (await probes.get(sourceNode)!.capacity()).images ?? [];
    const [refused] = await avoiding(sourceNode, () => whileNode('api-node', 'ready', () => Sandbox.fork(source.sandboxId, { ...sdk(), timeoutMs: 600_000 })));
    expect(refused).toBeInstanceOf(SandboxError);
    expect((refused as SandboxError).statusCode).toBe(500);
    expect((refused as Error).message).toMatch(new RegExp(`Fork of sandbox "${source.sandboxId}" failed: its checkpoint could not be pushed from node "${sourceNode}" to the registry`));
    expect((refused as Error).message).not.toContain(state!.registry.password);
    expect(platform!.lifecycle.list().length).toBe(recordsBefore);
    expect((await embedded.listManaged()).length).toBe(embeddedContainers);
    expect(((await probes.get(sourceNode)!.capacity()).images ?? []).filter((tag) => !sourceTags.includes(tag))).toEqual([]);

    const templateTags = async (): Promise<string[]> => {
      const all = await Promise.all([...probes.values()].map((probe) => probe.capacity().then((c) => c.images ?? [], () => [])));
      return all.flat().filter((tag) => tag.startsWith(`${state!.registry.host}/template:`));
    };
    const templatesBefore = await templateTags();
    const alias = `tp-down-${process.pid}`;
    const template = Template().fromTemplate('base').runCmd('echo unpushed > /opt/unpushed.txt', { user: 'root' });
    const build = await Template.build(template, alias, sdk()).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(build, 'the build must fail').toBeInstanceOf(Error);
    expect(build!.message).toMatch(/pushing the template image to the registry failed/);
    // The template has no usable build: a create from it is refused, and no node holds a pushed name for it.
    await expect(Sandbox.create(alias, sdk())).rejects.toThrow();
    expect((await templateTags()).filter((tag) => !templatesBefore.includes(tag))).toEqual([]);
    // Neither answer carries the registry's credentials.
    for (const message of [failed!.message, build!.message]) expect(message).not.toContain(state!.registry.password);
  }, 900_000);

  it('the registry password is in no agent log', () => {
    const password = state!.registry.password;
    for (const node of state!.nodes) expect(readFileSync(agentFiles(nodeLayout(clusterLayout(name, state!.slot, dir), node.index)).logFile, 'utf8')).not.toContain(password);
  });
});
