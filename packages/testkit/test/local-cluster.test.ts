/**
 * The local cluster end to end, against the real host: two node engines (dockerd in network namespaces on a
 * 198.19.<slot>.0/24 bridge), the local registry on the bridge address, containers from an image loaded from
 * the host engine, TLS on the nodes' TCP listeners, stop-node/start-node, and a `down` (after one node's
 * engine was SIGKILLed with a container running, as after a crash) that leaves nothing behind.
 * Every address contacted is in 198.18.0.0/15 or a unix socket. Needs root. One shared cluster (2 cores).
 */
import { existsSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUSYBOX_IMAGE,
  ClusterError,
  clusterLayout,
  clusterLeftovers,
  clusterStatus,
  downCluster,
  ensureBusyboxImage,
  freeClusterSlot,
  inBenchmarkRange,
  nodeDocker,
  nodeLayout,
  readClusterState,
  repoRoot,
  run,
  startClusterNode,
  stopClusterNode,
  upCluster,
  type ClusterState,
} from '../src/index.ts';
import { cgroupProcesses, nodeProcesses } from '../src/cluster-leftovers.ts';
import { agentAnswers } from '../src/cluster-agents.ts';
import { forwardRules } from '../src/cluster-network.ts';
import { createConnection, createServer } from 'node:net';

const isRoot = process.getuid?.() === 0;
const name = `t${process.pid % 10_000_000}`;
let slot = 1; // a free one is picked in beforeAll
const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-test-'));
let state: ClusterState;
let upMs = 0;

async function inNode(index: number, args: string[]): Promise<string> {
  const res = await nodeDocker(state.nodes[index - 1], args, { timeoutMs: 120_000 });
  if (res.exitCode !== 0) throw new Error(`docker ${args.join(' ')} on node${index} failed: ${res.stderr}`);
  return res.stdout.trim();
}

async function expectClusterError(promise: Promise<unknown>, kind: ClusterError['kind']): Promise<void> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ClusterError);
  expect((error as ClusterError).kind).toBe(kind);
}

describe.skipIf(!isRoot)('local cluster: bad input and a failed up', () => {
  it('refuses bad options before touching the host', async () => {
    const scratch = join(tmpdir(), 'tp-cluster-never-made');
    await expectClusterError(upCluster({ name: 'Bad Name', dir: scratch, nodes: 1 }), 'invalid');
    await expectClusterError(upCluster({ name, slot: 128, dir: scratch, nodes: 1 }), 'invalid');
    for (const nodes of [0, 33, 1.5]) await expectClusterError(upCluster({ name, slot: 1, dir: scratch, nodes }), 'invalid');
    expect(existsSync(scratch)).toBe(false);
  });

  it('an up that fails halfway (an image that does not exist, after the engines started) leaves nothing behind', async () => {
    const failName = `f${process.pid % 10_000_000}`;
    const failSlot = await freeClusterSlot();
    const failDir = mkdtempSync(join(tmpdir(), 'tp-cluster-fail-'));
    const error = await upCluster({ name: failName, slot: failSlot, dir: failDir, nodes: 1, images: ['tidepool/no-such-image:never'] }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterError);
    expect((error as Error).message).toContain('tidepool/no-such-image:never');
    expect(await clusterLeftovers(clusterLayout(failName, failSlot, failDir))).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    expect(existsSync(failDir)).toBe(false);
  });
});

describe.skipIf(!isRoot)('local cluster: node engines in network namespaces', () => {
  beforeAll(async () => {
    await ensureBusyboxImage();
    slot = await freeClusterSlot();
    const started = Date.now();
    state = await upCluster({ name, slot, dir, nodes: 2, images: [BUSYBOX_IMAGE] });
    upMs = Date.now() - started;
  });

  afterAll(async () => {
    await downCluster({ name, slot, dir });
  });

  it('brings up two engines on their own addresses in 198.18.0.0/15, each running a container from the image loaded from the host', async () => {
    expect(state.nodes.map((n) => n.id)).toEqual(['node1', 'node2']);
    // each node's agent answers over mutual TLS on the node's address
    for (const node of state.nodes) expect(await agentAnswers(node.agentUrl!, node.id, state.tls!)).toBe(true);
    expect(readClusterState(dir)).toEqual(state);
    for (const address of [state.bridgeAddress, ...state.nodes.map((n) => n.address), state.registry.host.split(':')[0]]) expect(inBenchmarkRange(address)).toBe(true);
    for (const node of state.nodes) {
      expect(await inNode(node.index, ['run', '--rm', BUSYBOX_IMAGE, 'echo', `hello from ${node.id}`])).toBe(`hello from ${node.id}`);
      expect(['overlay2', 'vfs']).toContain(node.storageDriver);
      expect(await inNode(node.index, ['info', '--format', '{{.Driver}}'])).toBe(node.storageDriver);
    }
    // each engine is its own: a container made on node1 does not exist on node2 or on the host
    const id = await inNode(1, ['create', BUSYBOX_IMAGE, 'true']);
    expect((await nodeDocker(state.nodes[1], ['inspect', id])).exitCode).not.toBe(0);
    expect((await run('docker', ['inspect', id])).exitCode).not.toBe(0);
    await inNode(1, ['rm', id]);
    // measured: reported in the suite log
    process.stderr.write(`[local-cluster] up with 2 nodes + busybox loaded: ${upMs} ms; engine starts ${state.nodes.map((n) => `${n.id} ${n.startMs} ms (${n.storageDriver})`).join(', ')}\n`);
  });

  it('answers on the node address over TCP only to clients with a certificate from the cluster CA', async () => {
    const node = state.nodes[0];
    expect(node.tcpHost).toBe(`tcp://${node.address}:2376`);
    const tls = state.tls!;
    const withCert = await run('docker', ['--tlsverify', '--tlscacert', tls.ca, '--tlscert', tls.cert, '--tlskey', tls.key, '-H', node.tcpHost!, 'version', '--format', '{{.Server.Version}}'], { timeoutMs: 30_000 });
    expect(withCert.exitCode, withCert.stderr).toBe(0);
    const plain = await run('docker', ['-H', node.tcpHost!, 'version', '--format', '{{.Server.Version}}'], { timeoutMs: 30_000 });
    expect(plain.exitCode).not.toBe(0);
    const noClientCert = await run('docker', ['--tlsverify', '--tlscacert', tls.ca, '-H', node.tcpHost!, 'version', '--format', '{{.Server.Version}}'], { timeoutMs: 30_000 });
    expect(noClientCert.exitCode).not.toBe(0);
    expect(noClientCert.stderr).toMatch(/certificate|tls|remote error/i);
  });

  it('lets a container on node1 reach node2 across the bridge, with no route out of 198.18.0.0/15', async () => {
    await inNode(2, ['run', '-d', '--name', 'web', '--stop-timeout', '1', '-p', '8080:8080', BUSYBOX_IMAGE, 'sh', '-c', 'mkdir /www && echo hello-from-node2 > /www/index.html && exec httpd -f -p 8080 -h /www']);
    const fetchFromNode1 = `printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 5 ${state.nodes[1].address} 8080`;
    let body = '';
    for (let attempt = 0; attempt < 20 && !body.includes('hello-from-node2'); attempt += 1) {
      body = await inNode(1, ['run', '--rm', BUSYBOX_IMAGE, 'sh', '-c', fetchFromNode1]).catch(() => '');
      if (!body.includes('hello-from-node2')) await new Promise((r) => setTimeout(r, 250));
    }
    expect(body).toContain('hello-from-node2');
    for (const node of state.nodes) {
      const routes = (await run('ip', ['-n', node.netns, '-4', 'route', 'show'])).stdout.trim().split('\n');
      expect(routes.some((r) => r.startsWith('default'))).toBe(false);
      for (const route of routes) expect(inBenchmarkRange(route.split(' ')[0].split('/')[0]), route).toBe(true);
    }
    // and the host forwards nothing between the bridge and any other interface
    const [accept, dropOut, dropIn] = forwardRules(clusterLayout(name, slot, dir));
    expect(dropOut.join(' ')).toBe(`-i ${state.bridge} ! -o ${state.bridge} -m comment --comment tidepool-cluster/${name} -j DROP`);
    expect(dropIn.join(' ')).toBe(`! -i ${state.bridge} -o ${state.bridge} -m comment --comment tidepool-cluster/${name} -j DROP`);
    for (const rule of [accept, dropOut, dropIn]) expect((await run('iptables', ['-C', 'FORWARD', ...rule])).exitCode, rule.join(' ')).toBe(0);
  });

  it('keeps the host closed to the nodes except for the registry port (a hostile sandbox on a node finds nothing else)', async () => {
    const server = createServer((socket) => socket.end('host-service\n'));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, state.bridgeAddress, resolve));
    const port = (server.address() as { port: number }).port;
    try {
      expect(await new Promise<string>((resolve) => {
        // the host itself can use it: the listener is real
        const probe = createConnection({ host: state.bridgeAddress, port }, () => undefined);
        let data = '';
        probe.on('data', (chunk) => (data += chunk.toString()));
        probe.on('close', () => resolve(data));
      })).toBe('host-service\n');
      const [registryHost, registryPort] = state.registry.host.split(':');
      const connect = (target: string): Promise<string> =>
        inNode(1, ['run', '--rm', BUSYBOX_IMAGE, 'sh', '-c', `printf 'GET /v2/ HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${target} && echo connected || echo refused`]);
      expect(await connect(`${registryHost} ${registryPort}`)).toContain('401 Unauthorized');
      const blocked = await connect(`${state.bridgeAddress} ${port}`);
      expect(blocked).not.toContain('host-service');
      expect(blocked).toContain('refused');
    } finally {
      server.close();
    }
  });

  it('pushes an image from node1 to the registry on the bridge address and pulls it on node2', async () => {
    const config = join(dir, 'docker-config'); // inside the cluster directory: down removes it
    const login = ['--config', config, 'login', state.registry.host, '-u', state.registry.username, '--password-stdin'];
    for (const node of state.nodes) {
      const res = await nodeDocker(node, login, { input: state.registry.password });
      expect(res.exitCode, res.stderr).toBe(0);
    }
    // an image only node1 has: a layer with a file written there
    const marker = `made-on-node1-${Date.now()}`;
    const maker = await inNode(1, ['run', '-d', BUSYBOX_IMAGE, 'sh', '-c', `echo ${marker} > /marker`]);
    await inNode(1, ['wait', maker]);
    const ref = `${state.registry.host}/cluster-test/marker:1`;
    await inNode(1, ['commit', maker, ref]);
    await inNode(1, ['rm', maker]);
    await inNode(1, ['--config', config, 'push', ref]);
    expect((await nodeDocker(state.nodes[1], ['image', 'inspect', ref])).exitCode).not.toBe(0);
    await inNode(2, ['--config', config, 'pull', ref]);
    expect(await inNode(2, ['run', '--rm', ref, 'cat', '/marker'])).toBe(marker);
    // without credentials the registry refuses
    const anonymous = await nodeDocker(state.nodes[1], ['--config', join(dir, 'anonymous-docker-config'), 'pull', `${state.registry.host}/cluster-test/marker:1`]);
    expect(anonymous.exitCode).not.toBe(0);
  });

  it('stop-node makes that engine unreachable (and kills its containers) while the other keeps working; start-node brings it back with its images', async () => {
    const node2 = nodeLayout(clusterLayout(name, slot, dir), 2);
    await stopClusterNode(dir, 'node2');
    const status = await clusterStatus(dir);
    expect(status.nodes.map((n) => [n.id, n.running])).toEqual([['node1', true], ['node2', false]]);
    expect(status.registryUp).toBe(true);
    expect((await nodeDocker(state.nodes[1], ['ps'], { timeoutMs: 10_000 })).exitCode).not.toBe(0);
    expect(nodeProcesses({ netns: node2.netns, dir: node2.dir })).toEqual([]);
    expect(cgroupProcesses(node2.cgroupParent)).toEqual([]);
    const tls = state.tls!;
    const tcp = await run('docker', ['--tlsverify', '--tlscacert', tls.ca, '--tlscert', tls.cert, '--tlskey', tls.key, '-H', state.nodes[1].tcpHost!, 'version'], { timeoutMs: 30_000 });
    expect(tcp.exitCode).not.toBe(0);
    expect(await inNode(1, ['run', '--rm', BUSYBOX_IMAGE, 'echo', 'still here'])).toBe('still here');
    await expectClusterError(stopClusterNode(dir, 'node3'), 'invalid');
    await expectClusterError(stopClusterNode(dir, 'bogus'), 'invalid');

    expect(status.nodes[1].agentPid).toBeNull();
    expect(await agentAnswers(state.nodes[1].agentUrl!, 'node2', state.tls!)).toBe(false);
    expect(await agentAnswers(state.nodes[0].agentUrl!, 'node1', state.tls!)).toBe(true);

    const restarted = await startClusterNode(dir, 'node2');
    expect(restarted.startMs).toBeGreaterThan(0);
    expect(restarted.agentUrl).toBe(`https://${state.nodes[1].address}:7443`);
    expect(await agentAnswers(restarted.agentUrl!, 'node2', state.tls!)).toBe(true);
    expect(await inNode(2, ['run', '--rm', `${state.registry.host}/cluster-test/marker:1`, 'cat', '/marker'])).toMatch(/^made-on-node1-/);
    await expectClusterError(startClusterNode(dir, 'node2'), 'exists');
  }, 240_000); // stops and starts an engine and its agent (tsx compiling: 20-30 s on the loaded VM)

  it('pnpm cluster:local reads the same state: env, status --json; bad commands and arguments get clear errors', async () => {
    const cli = (...args: string[]) => run(join(repoRoot(), 'node_modules/.bin/tsx'), [join(repoRoot(), 'packages/testkit/bin/cluster-local.ts'), ...args], { timeoutMs: 60_000 });
    const env = await cli('env', '--dir', dir);
    expect(env.exitCode, env.stderr).toBe(0);
    expect(env.stdout).toContain(`DOCKER_HOST_1=unix://${state.nodes[0].socket}\n`);
    expect(env.stdout).toContain(`DOCKER_HOST_2=unix://${state.nodes[1].socket}\n`);
    expect(env.stdout).toContain(`TIDEPOOL_REGISTRY=${state.registry.host}\n`);
    expect(env.stdout).toContain(`TIDEPOOL_NODE_AGENT_URL_1=https://${state.nodes[0].address}:7443\n`);
    expect(env.stdout).toContain(`TIDEPOOL_CLUSTER_CLIENT_CERT=${state.tls!.cert}\n`);
    const status = await cli('status', '--json', '--dir', dir);
    expect(status.exitCode, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as { nodes: { id: string; running: boolean }[] }).nodes.map((n) => [n.id, n.running])).toEqual([['node1', true], ['node2', true]]);
    const missing = await cli('status', '--dir', join(dir, 'nothing-here'));
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain("run 'up' first");
    const unknown = await cli('bogus');
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'bogus'");
    const noId = await cli('stop-node', '--dir', dir);
    expect(noId.exitCode).toBe(2);
    const badId = await cli('stop-node', 'node7', '--dir', dir);
    expect(badId.exitCode).toBe(1);
    expect(badId.stderr).toContain('has no node7');
    const load = await cli('load', BUSYBOX_IMAGE, '--node', 'node2', '--dir', dir);
    expect(load.exitCode, load.stderr).toBe(0);
    expect(load.stderr).toMatch(new RegExp(`node2 loaded ${BUSYBOX_IMAGE} in \\d+ ms`));
    const loadMissing = await cli('load', 'tidepool/no-such-image:never', '--dir', dir);
    expect(loadMissing.exitCode).toBe(1);
    expect(loadMissing.stderr).toContain('loading tidepool/no-such-image:never into node1 failed');
    const badCount = await cli('up', '--nodes', 'many', '--dir', join(dir, 'other'));
    expect(badCount.exitCode).toBe(2);
  }, 240_000); // ten CLI runs, each compiling the CLI with tsx: 10-12 s apiece on the shared 2-core VM

  it('refuses a second up of the same cluster and leaves the first untouched', async () => {
    await expectClusterError(upCluster({ name, slot, dir, nodes: 1 }), 'exists');
    // another cluster on the same subnet would put a second 198.19.<slot>.1 on the host: refused before anything is made
    const otherName = `o${process.pid % 10_000_000}`;
    const otherDir = join(tmpdir(), `tp-cluster-other-${process.pid}`);
    await expectClusterError(upCluster({ name: otherName, slot, dir: otherDir, nodes: 1 }), 'exists');
    expect(await clusterLeftovers(clusterLayout(otherName, slot, otherDir))).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    expect(existsSync(otherDir)).toBe(false);
    expect((await clusterStatus(dir)).nodes.every((n) => n.running)).toBe(true);
  });

  it('down after a node engine was SIGKILLed with a container running leaves no namespace, interface, mount, rule, cgroup or process', async () => {
    const node1 = nodeLayout(clusterLayout(name, slot, dir), 1);
    await inNode(1, ['run', '-d', BUSYBOX_IMAGE, 'sleep', '600']);
    const pid = (await clusterStatus(dir)).nodes[0].pid!;
    process.kill(pid, 'SIGKILL'); // a crash: containerd, the shim and the container survive it
    await new Promise((r) => setTimeout(r, 200));
    expect(cgroupProcesses(node1.cgroupParent).length).toBeGreaterThan(0);

    const report = await downCluster({ name, slot, dir });
    expect(report.nodesStopped).toEqual(['node1', 'node2']);
    expect(report.leftovers).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    expect(await clusterLeftovers(clusterLayout(name, slot, dir))).toEqual(report.leftovers);
    expect(existsSync(dir)).toBe(false);
    for (const hierarchy of readdirSync('/sys/fs/cgroup')) {
      for (const index of [1, 2]) expect(existsSync(join('/sys/fs/cgroup', hierarchy, `tp-${name}-node${index}`))).toBe(false);
    }
    expect(existsSync(join('/sys/fs/cgroup', `tp-${name}-node1`)) && statSync(join('/sys/fs/cgroup', `tp-${name}-node1`)).isDirectory()).toBe(false);
    // idempotent: a second down finds nothing and fails at nothing
    expect((await downCluster({ name, slot, dir })).nodesStopped).toEqual([]);
    await expectClusterError(clusterStatus(dir), 'not-found');
  });
});
