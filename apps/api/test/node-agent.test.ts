/**
 * The node agent (`tidepool node`) and its client (`connectRemoteNode`) end to end: a one-node local cluster (the
 * node's engine and its agent in a network namespace on 198.19.<slot>.0/24, the base image loaded into it), driven
 * from this process over mutual TLS exactly as the API will drive it. Sandbox containers started through the
 * channel, envd reached through the agent's tunnel, pause/unpause/commit/inspect/listManaged/remove, engine events;
 * refusals at the TLS layer, at the tunnel and at the call table; a stopped (SIGSTOP) agent and a garbage-answering
 * one give the client's own errors. Every address contacted is loopback or in 198.18.0.0/15. Needs root.
 */
import { createServer as createHttpsServer, request as httpsRequest, type Server } from 'node:https';
import { X509Certificate } from 'node:crypto';
import { readFileSync, mkdtempSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BASE_IMAGE,
  agentFiles,
  agentPid,
  clusterLayout,
  downCluster,
  ensureClusterTls,
  ensureNodeServerTls,
  freeClusterSlot,
  NODE_METRICS_PORT,
  nodeDocker,
  nodeLayout,
  run,
  upCluster,
  type ClusterState,
} from '@tidepool/testkit';
import { PlatformError } from '../src/errors.ts';
import { DockerCallError } from '../src/runtime/docker/docker-call.ts';
import type { EngineEvent } from '../src/runtime/engine-events.ts';
import { NodeChannelError } from '../src/nodes/node-channel-errors.ts';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import { helloNode } from '../src/nodes/node-hello.ts';
import { NODE_PROTOCOL_VERSION } from '../src/nodes/node-protocol.ts';
import { EnvdProcessClient, shellCommand } from '../src/envd/envd-process-client.ts';

const isRoot = process.getuid?.() === 0;
const ENVD_PORT = 49983;
const name = `a${process.pid % 10_000_000}`;
const dir = mkdtempSync(join(tmpdir(), 'tp-node-agent-test-'));
let slot = 0;
let state: ClusterState;
let node: RemoteNode;
let tls: { ca: Buffer; cert: Buffer; key: Buffer };

async function channelError(promise: Promise<unknown>): Promise<NodeChannelError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(NodeChannelError);
  return error as NodeChannelError;
}

/** One `GET /health` over a fresh stream; resolves with the status line. */
function healthOver(stream: Duplex): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) {
        stream.destroy();
        resolve(text.split('\r\n')[0]);
      }
    });
    stream.once('error', reject);
    stream.once('close', () => resolve(text.split('\r\n')[0]));
    stream.write('GET /health HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n\r\n');
  });
}

/** `count` keep-alive `GET /health` requests over one stream; per-request milliseconds. */
async function healthLoop(stream: Duplex, count: number): Promise<number[]> {
  const times: number[] = [];
  let buffered = '';
  let waiting: (() => void) | undefined;
  stream.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('latin1');
    if (buffered.includes('\r\n\r\n') && waiting) waiting();
  });
  for (let i = 0; i < count; i += 1) {
    const started = process.hrtime.bigint();
    await new Promise<void>((resolve) => {
      waiting = () => {
        buffered = buffered.slice(buffered.indexOf('\r\n\r\n') + 4);
        waiting = undefined;
        resolve();
      };
      stream.write('GET /health HTTP/1.1\r\nHost: envd\r\n\r\n');
    });
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  stream.destroy();
  return times;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Raw HTTPS request to the agent with the given client material. */
function rawRequest(options: { method: string; path: string; body?: string; cert?: Buffer | string; key?: Buffer | string }): Promise<{ status: number; body: string }> {
  const url = new URL(state.nodes[0].agentUrl!);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { hostname: url.hostname, port: url.port, path: options.path, method: options.method, ca: tls.ca, cert: options.cert, key: options.key, agent: false, timeout: 10_000, headers: { 'content-type': 'application/json' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The agent's own metrics (TIDEPOOL_NODE_METRICS_LISTEN, which the local cluster sets on every agent). */
function scrapeAgent(): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: state.nodes[0].address, port: NODE_METRICS_PORT, path: '/metrics', agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** One sample of a scrape (`name{labels}` exactly as exposed), or undefined. */
function sample(body: string, series: string): number | undefined {
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function waitForEnvd(address: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await node.dial(address, ENVD_PORT).then(healthOver, (e: Error) => e.message);
    if (status === 'HTTP/1.1 204 No Content') return;
    if (Date.now() > deadline) throw new Error(`envd at ${address} not healthy through the tunnel: ${status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function spec(sandboxId: string) {
  return { sandboxId, templateId: 'base', image: BASE_IMAGE, cpuCount: 1, memoryMB: 256, envdAccessToken: `tok_${sandboxId}`, envdVersion: '0.6.14' };
}

describe.skipIf(!isRoot)('node agent over mutual TLS (one-node local cluster)', () => {
  beforeAll(async () => {
    slot = await freeClusterSlot();
    state = await upCluster({ name, slot, dir, nodes: 1, images: [BASE_IMAGE] });
    tls = { ca: readFileSync(state.tls!.ca), cert: readFileSync(state.tls!.cert), key: readFileSync(state.tls!.key) };
    node = connectRemoteNode({ nodeId: 'node1', url: state.nodes[0].agentUrl!, tls });
    process.stderr.write(`[node-agent] agent of node1 up in ${state.nodes[0].agentStartMs} ms at ${state.nodes[0].agentUrl}\n`);
  });

  afterAll(async () => {
    node?.close();
    await downCluster({ name, slot, dir });
  });

  it('answers health and capacity as the node it is', async () => {
    expect(state.nodes[0].agentUrl).toBe(`https://${state.nodes[0].address}:7443`);
    expect(await node.health()).toEqual({ nodeId: 'node1', version: '2' });
    // Version 2: its egress proxy applies network.rules and its tunnel egressProxy (a host install with conntrack).
    expect(await node.runtime.egressTransformsAvailable()).toBe(true);
    expect(await node.runtime.egressUpstreamProblem()).toBeUndefined();
    const capacity = await node.capacity();
    expect(capacity.cpuCount).toBeGreaterThan(0);
    expect(capacity.memoryMB).toBeGreaterThan(0);
    expect(capacity.memoryAvailableMB).toBeLessThanOrEqual(capacity.memoryMB);
    expect(capacity.images).toContain(BASE_IMAGE);
    // a client that expects another node at that URL is refused at the TLS handshake: the certificate names node1 only
    const impostor = connectRemoteNode({ nodeId: 'node9', url: state.nodes[0].agentUrl!, tls });
    const refused = await channelError(impostor.health());
    expect(refused.code).toBe('identity');
    expect(refused.message).toContain('does not name node "node9"');
    impostor.close();
  });

  it('says Hello over the node protocol as the node its certificate names, and holds no database or API secret', async () => {
    const hello = await helloNode({ url: state.nodes[0].agentUrl!, tls, deadlineMs: 10_000 });
    expect(hello).toMatchObject({ protocolVersion: NODE_PROTOCOL_VERSION, nodeId: 'node1', agentVersion: '2' });
    expect(hello.certificate).toBe(new X509Certificate(readFileSync(join(dir, 'tls', 'node1-server.pem'))).fingerprint256);
    expect(hello.capacity.images).toContain(BASE_IMAGE);
    expect(hello.startedAtMs).toBeGreaterThan(Date.now() - 3_600_000);
    // offered only versions it does not speak, the agent answers a typed refusal naming its own
    const refused = await channelError(helloNode({ url: state.nodes[0].agentUrl!, tls, deadlineMs: 10_000, versions: [NODE_PROTOCOL_VERSION + 1] }));
    expect(refused.code).toBe('version');
    expect(refused.message).toContain(`the node speaks ${NODE_PROTOCOL_VERSION}`);
    // the agent process was given no database setting and no API-only secret
    const environ = readFileSync(`/proc/${agentPid(nodeLayout(clusterLayout(name, slot, dir), 1))}/environ`, 'utf8').split('\0').map((line) => line.split('=')[0]);
    expect(environ).toContain('TIDEPOOL_NODE_ID');
    expect(environ.filter((name) => /^TIDEPOOL_(DATABASE|SECRETS_KEY|TOKEN_SEED|ADMIN_KEY|API_KEYS)/.test(name))).toEqual([]);
  });

  it('runs a sandbox container through the channel: envd through the tunnel, pause/unpause, commit, inspect, listManaged, engine events, remove', async () => {
    const sandboxId = `isbagent${Date.now()}`;
    expect(await node.runtime.imageExists(BASE_IMAGE)).toBe(true);
    expect(await node.runtime.imageEnvdVersion(BASE_IMAGE)).toMatch(/^\d+\.\d+\.\d+/);
    const started = await node.runtime.startContainer(spec(sandboxId));
    expect(started.containerId).toMatch(/^[0-9a-f]{64}$/);
    expect(started.egressApplied).toBeUndefined(); // the agent waited for the rules; none failed
    await waitForEnvd(started.address);
    expect(await node.runtime.inspect(started.containerId)).toEqual({ status: 'running', address: started.address });
    // a (hostile) sandbox cannot even open a connection to its node's agent (the isolation rules drop it; the
    // listener would refuse it at TLS anyway)
    const probe = `(exec 3<>/dev/tcp/${state.nodes[0].address}/7443 && echo open) & pid=$!; sleep 3; kill $pid 2>/dev/null && echo blocked; wait`;
    const reach = await nodeDocker(state.nodes[0], ['exec', started.containerId, 'bash', '-c', probe], { timeoutMs: 30_000 });
    expect(reach.stdout).not.toContain('open');
    expect(`${reach.stdout}${reach.stderr}`).toMatch(/blocked|refused|unreachable/i);
    const managed = await node.runtime.listManaged();
    expect(managed).toContainEqual(expect.objectContaining({ containerId: started.containerId, sandboxId, status: 'running', address: started.address, pooled: false }));

    await node.runtime.pause(started.containerId);
    expect((await node.runtime.inspect(started.containerId)).status).toBe('paused');
    // a frozen envd does not answer: the tunnel connects (TCP is the kernel's) but no response comes
    const frozen = await node.dial(started.address, ENVD_PORT);
    const answer = await Promise.race([healthOver(frozen), new Promise<string>((r) => setTimeout(() => r('no answer'), 1_000))]);
    frozen.destroy();
    expect(answer).toBe('no answer');
    await node.runtime.unpause(started.containerId);
    expect((await node.runtime.inspect(started.containerId)).status).toBe('running');
    expect(await node.dial(started.address, ENVD_PORT).then(healthOver)).toBe('HTTP/1.1 204 No Content');

    const image = await node.runtime.commitSandbox(started.containerId, sandboxId);
    expect(image).toBe(`tidepool/paused:${sandboxId}`);
    expect(await node.runtime.imageExists(image)).toBe(true);
    expect(await node.runtime.listSandboxImages()).toContainEqual({ image, sandboxId });
    await node.runtime.removeSandboxImage(sandboxId);
    expect(await node.runtime.imageExists(image)).toBe(false);

    const events: EngineEvent[] = [];
    const stream = await node.runtime.watchEvents!(undefined, (event) => events.push(event));
    try {
      const kill = await nodeDocker(state.nodes[0], ['kill', started.containerId]);
      expect(kill.exitCode, kill.stderr).toBe(0);
      const deadline = Date.now() + 20_000;
      while (!events.some((e) => e.kind === 'died' && e.containerId === started.containerId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(events).toContainEqual(expect.objectContaining({ kind: 'died', containerId: started.containerId, sandboxId }));
    } finally {
      stream.close();
    }
    expect(await stream.ended).toBeUndefined();
    expect((await node.runtime.inspect(started.containerId)).status).toBe('stopped');

    await node.runtime.remove(started.containerId);
    expect(await node.runtime.inspect(started.containerId)).toEqual({ status: 'missing', address: undefined });
    await node.runtime.remove(started.containerId); // missing is not an error
    expect((await node.runtime.listManaged()).some((c) => c.containerId === started.containerId)).toBe(false);
  });

  it('measures the tunnel: GET /health through the agent vs a direct connect from inside the node', async () => {
    const started = await node.runtime.startContainer(spec(`isbbench${Date.now()}`));
    try {
      await waitForEnvd(started.address);
      const count = 40;
      const fresh: number[] = [];
      for (let i = 0; i < count; i += 1) {
        const t0 = process.hrtime.bigint();
        expect(await node.dial(started.address, ENVD_PORT).then(healthOver)).toBe('HTTP/1.1 204 No Content');
        fresh.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      const reused = await healthLoop(await node.dial(started.address, ENVD_PORT), count);
      // The same requests straight to the container, from a process in the node's namespace (where the API-less
      // embedded node would be): a new TCP connection per request, then one connection reused.
      const script = `
        const net = require('node:net');
        const one = (s) => new Promise((res) => { let t=''; const on=(d)=>{ t+=d; if (t.includes('\\r\\n\\r\\n')) { s.off('data', on); res(); } }; s.on('data', on); s.write('GET /health HTTP/1.1\\r\\nHost: envd\\r\\n\\r\\n'); });
        (async () => {
          const fresh = [], reused = [];
          for (let i = 0; i < ${count}; i++) { const t0 = process.hrtime.bigint(); const s = net.connect(${ENVD_PORT}, '${started.address}'); await new Promise((r) => s.once('connect', r)); await one(s); s.destroy(); fresh.push(Number(process.hrtime.bigint() - t0) / 1e6); }
          const s = net.connect(${ENVD_PORT}, '${started.address}'); await new Promise((r) => s.once('connect', r));
          for (let i = 0; i < ${count}; i++) { const t0 = process.hrtime.bigint(); await one(s); reused.push(Number(process.hrtime.bigint() - t0) / 1e6); }
          s.destroy();
          console.log(JSON.stringify({ fresh, reused }));
        })();`;
      const direct = await run('nsenter', [`--net=/run/netns/${state.nodes[0].netns}`, process.execPath, '-e', script], { timeoutMs: 60_000 });
      expect(direct.exitCode, direct.stderr).toBe(0);
      const baseline = JSON.parse(direct.stdout) as { fresh: number[]; reused: number[] };
      const figures = {
        freshTunnelP50: median(fresh),
        freshDirectP50: median(baseline.fresh),
        reusedTunnelP50: median(reused),
        reusedDirectP50: median(baseline.reused),
      };
      process.stderr.write(
        `[node-agent] GET /health p50 over ${count}: new tunnel per request ${figures.freshTunnelP50.toFixed(2)} ms vs new direct connection ${figures.freshDirectP50.toFixed(2)} ms; ` +
          `over one open tunnel ${figures.reusedTunnelP50.toFixed(2)} ms vs one direct connection ${figures.reusedDirectP50.toFixed(2)} ms ` +
          `(added: ${(figures.freshTunnelP50 - figures.freshDirectP50).toFixed(2)} ms per new tunnel, ${(figures.reusedTunnelP50 - figures.reusedDirectP50).toFixed(2)} ms per request on an open one)\n`,
      );
      for (const value of Object.values(figures)) expect(value).toBeGreaterThan(0);
      // and one runtime call's round trip through the channel (keep-alive HTTPS, the agent, the node's engine)
      const calls: number[] = [];
      for (let i = 0; i < count; i += 1) {
        const t0 = process.hrtime.bigint();
        expect((await node.runtime.inspect(started.containerId)).status).toBe('running');
        calls.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      process.stderr.write(`[node-agent] inspect through the channel p50 over ${count}: ${median(calls).toFixed(2)} ms\n`);
    } finally {
      await node.runtime.remove(started.containerId);
    }
  });

  it('refuses at the TLS layer any client without a certificate from the cluster CA, and server certificates used as client ones', async () => {
    const ok = await rawRequest({ method: 'GET', path: '/v1/health', cert: tls.cert, key: tls.key });
    expect(ok.status).toBe(200);
    await expect(rawRequest({ method: 'GET', path: '/v1/health' })).rejects.toThrow(/certificate|socket hang up|ECONNRESET|alert/i);
    const otherDir = join(dir, 'other-ca');
    const other = await ensureClusterTls(otherDir);
    await expect(rawRequest({ method: 'GET', path: '/v1/health', cert: readFileSync(other.cert), key: readFileSync(other.key) })).rejects.toThrow(/certificate|unknown ca|socket hang up|ECONNRESET|alert/i);
    const foreign = connectRemoteNode({ nodeId: 'node1', url: state.nodes[0].agentUrl!, tls: { ca: tls.ca, cert: readFileSync(other.cert), key: readFileSync(other.key) } });
    const refused = await channelError(foreign.runtime.listManaged());
    expect(refused.code).toBe('unreachable');
    expect(await channelError(foreign.dial('198.19.192.2', ENVD_PORT)).then((e) => e.code)).toBe('unreachable');
    foreign.close();
    // a node's own server certificate (same CA, serverAuth only) cannot drive an agent: one node cannot drive another
    const layout = nodeLayout(clusterLayout(name, slot, dir), 1);
    const nodeCert = { cert: readFileSync(join(layout.dir, '..', 'tls', 'node1-server.pem')), key: readFileSync(join(layout.dir, '..', 'tls', 'node1-server-key.pem')) };
    await expect(rawRequest({ method: 'GET', path: '/v1/health', ...nodeCert })).rejects.toThrow(/socket hang up|ECONNRESET/i);
    // and plain HTTP gets no answer in the protocol
    const plain = await fetch(`http://${state.nodes[0].address}:7443/v1/health`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status, (e: Error) => e.message);
    expect(plain).not.toBe(200);
  });

  it('tunnels only to managed containers: the node itself, its engine, other addresses and malformed targets are refused', async () => {
    for (const [address, port] of [[state.nodes[0].address, 2376], [state.nodes[0].address, 7443], [state.bridgeAddress, 22], ['198.19.192.1', 53], ['198.19.192.250', ENVD_PORT]] as const) {
      const error = await channelError(node.dial(address, port));
      expect(error.code, `${address}:${port}`).toBe('tunnel_refused');
      expect(error.message).toContain('is not the address of a sandbox container on this node');
    }
    for (const target of ['localhost:22', '198.19.192.2:0', '198.19.192.2:70000', '[::1]:22', '198.19.192.2']) {
      const error = await channelError(node.dial(target.split(':')[0], Number(target.split(':')[1] ?? 'x')));
      expect(error.code, target).toBe('tunnel_refused');
      expect(error.message).toContain('CONNECT target must be');
    }
    // the HTTP/1.1 CONNECT the agent also serves applies the same rule
    const url = new URL(state.nodes[0].agentUrl!);
    const http1 = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest({ hostname: url.hostname, port: url.port, method: 'CONNECT', path: `${state.nodes[0].address}:2376`, ca: tls.ca, cert: tls.cert, key: tls.key, agent: false });
      req.once('connect', (res, socket, head) => {
        let body = head.toString();
        socket.on('data', (chunk: Buffer) => (body += chunk.toString()));
        socket.once('close', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.once('error', reject);
      req.end();
    });
    expect(http1.status).toBe(403);
    expect(http1.body).toContain('is not the address of a sandbox container on this node');
    // a managed container's port nobody listens on: refused by the container, reported as such
    const started = await node.runtime.startContainer(spec(`isbport${Date.now()}`));
    try {
      const closed = await channelError(node.dial(started.address, 1));
      expect(closed.code).toBe('tunnel_refused');
      expect(closed.message).toMatch(/dial .* failed/);
    } finally {
      await node.runtime.remove(started.containerId);
    }
  });

  it('boots a sandbox in one call (protocol 2): the node waits for envd and sends its /init there, no tunnel opened for it', async () => {
    const sandboxId = `isbboot${Date.now()}`;
    const calls = (body: string, operation: string): number => sample(body, `tidepool_agent_engine_call_duration_seconds_count{operation="${operation}",outcome="success"}`) ?? 0;
    const before = (await scrapeAgent()).body;
    const booted = await node.runtime.bootContainer(spec(sandboxId), { envVars: { BOOT_CHECK: sandboxId }, defaultUser: 'user', defaultWorkdir: '/tmp' });
    const after = (await scrapeAgent()).body;
    try {
      expect(booted.containerId).toMatch(/^[0-9a-f]{64}$/);
      expect(booted.envdVersion).toMatch(/^\d+\.\d+\.\d+/);
      // one runtime call, and nothing crossed the channel as a tunnel (no envd probe, no /health, no /init)
      expect(calls(after, 'bootContainer') - calls(before, 'bootContainer')).toBe(1);
      expect(calls(after, 'startContainer') - calls(before, 'startContainer')).toBe(0);
      expect(calls(after, 'inspect') - calls(before, 'inspect')).toBe(0);
      expect(sample(after, 'tidepool_agent_tunnel_streams_total')! - sample(before, 'tidepool_agent_tunnel_streams_total')!).toBe(0);
      // envd was told this sandbox's /init (its environment, user and workdir) with the spec's own token
      const envd = new EnvdProcessClient(booted.address, { accessToken: `tok_${sandboxId}`, dial: (address, port) => node.dial(address, port) });
      let stdout = '';
      const result = await envd.run(shellCommand('echo "$BOOT_CHECK $(id -un) $(pwd)"', { timeoutMs: 10_000 }), { stdout: (text) => (stdout += text) });
      expect(result.exitCode).toBe(0);
      expect(stdout.trim()).toBe(`${sandboxId} user /tmp`);
      expect(await node.runtime.inspect(booted.containerId)).toEqual({ status: 'running', address: booted.address });
    } finally {
      await node.runtime.remove(booted.containerId);
    }
  });

  it('a boot that fails leaves nothing on the node; a boot whose caller gave up mid-way is removed once it ends', async () => {
    const sandboxId = `isbbootfail${Date.now()}`;
    const before = (await node.runtime.listManaged()).length;
    const failed = await node.runtime.bootContainer({ ...spec(sandboxId), image: 'tidepool/no-such-image:never' }, { envVars: {}, defaultUser: 'user', defaultWorkdir: '' }).then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(DockerCallError);
    expect((await node.runtime.listManaged()).length).toBe(before);
    // The caller gives up before the boot ends: the node finishes it, sees nobody waits, removes the container.
    const hasty = connectRemoteNode({ nodeId: 'node1', url: state.nodes[0].agentUrl!, tls, deadlines: { bootContainer: 200 } });
    const gaveUp = `isbbootgaveup${Date.now()}`;
    const error = await channelError(hasty.runtime.bootContainer(spec(gaveUp), { envVars: {}, defaultUser: 'user', defaultWorkdir: '' }));
    hasty.close();
    expect(error.code).toBe('deadline');
    const log = agentFiles(nodeLayout(clusterLayout(name, slot, dir), 1)).logFile;
    const removed = (): boolean => readFileSync(log, 'utf8').split('\n').some((line) => line.includes(gaveUp) && line.includes('caller left before its container started'));
    const left = async (): Promise<string> => (await nodeDocker(state.nodes[0], ['ps', '-a', '--filter', `label=dev.tidepool.sandbox-id=${gaveUp}`, '--format', '{{.ID}}'])).stdout.trim();
    const deadline = Date.now() + 60_000;
    while (!(removed() && (await left()) === '') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(removed()).toBe(true);
    expect(await left()).toBe('');
  });

  it('refuses unknown methods and malformed arguments with clear errors, and maps engine failures back', async () => {
    const unknown = await channelError(node.runtime.call('exec' as never, ['x']));
    expect(unknown.code).toBe('bad_call');
    expect(unknown.message).toContain('unknown method "exec"');
    const malformed = await channelError(node.runtime.call('remove', ['../../containers/abc']));
    expect(malformed.code).toBe('bad_call');
    expect(malformed.message).toContain('invalid arguments');
    const before = (await node.runtime.listManaged()).length;
    const mount = await channelError(node.runtime.startContainer({ ...spec(`isbmount${Date.now()}`), directories: [{ source: '/etc', target: '/host' }] }));
    expect(mount.message).toContain("not inside the node's volumes root");
    expect((await node.runtime.listManaged()).length).toBe(before); // nothing was made
    for (const [body, message] of [['not json', 'not JSON'], ['{"args":"x"}', '{"args": [...]}'], [JSON.stringify({ args: ['x'.repeat(2 * 1024 * 1024)] }), 'over']] as const) {
      const res = await rawRequest({ method: 'POST', path: '/v1/runtime/pause', body, cert: tls.cert, key: tls.key }).catch((e: Error) => ({ status: 0, body: e.message }));
      if (res.status !== 0) {
        expect(res.status).toBeGreaterThanOrEqual(400);
        const { error } = JSON.parse(res.body) as { error: { code: string; message: string } };
        expect(error.code).toBe('bad_call');
        expect(error.message).toContain(message);
      }
    }
    const route = await rawRequest({ method: 'GET', path: '/containers/json', cert: tls.cert, key: tls.key });
    expect(route.status).toBe(404);
    expect(JSON.parse(route.body)).toEqual({ error: { code: 'bad_call', message: 'no route GET /containers/json' } });
    // the engine's own failures come back as DockerCallError with its status (the REST layer maps 404 through)
    const missing = await node.runtime.pause('f'.repeat(64)).then(() => undefined, (e: unknown) => e);
    expect(missing).toBeInstanceOf(DockerCallError);
    expect((missing as DockerCallError).statusCode).toBe(404);
    const noImage = await node.runtime.imageEnvdVersion('tidepool/no-such-image:never').then(() => undefined, (e: unknown) => e);
    expect(noImage).toBeInstanceOf(DockerCallError);
    expect((noImage as DockerCallError).statusCode).toBe(404);
    expect(noImage).not.toBeInstanceOf(PlatformError);
  });

  it('refuses what the platform never asks of a node (binds outside its own volume directories, containers it did not make, image names outside its repositories), counted in its metrics', async () => {
    const volumeID = `vol_${`g${name}${'0'.repeat(20)}`.slice(0, 20)}`;
    const linkedID = `vol_${`l${name}${'0'.repeat(20)}`.slice(0, 20)}`;
    await node.volumes!.create(volumeID);
    const hostDir = await node.volumes!.hostDir(volumeID);
    // What a sandbox can make inside its volume, and a volume directory that is itself a link.
    symlinkSync('/', join(hostDir, 'escape'));
    symlinkSync('/', join(dirname(hostDir), linkedID));
    const foreign = `tpforeign${name}`;
    const started = await node.runtime.startContainer({ ...spec(`isbbind${Date.now()}`), directories: [{ source: hostDir, target: '/data' }] });
    try {
      // the agent's own volume directory is bound as made
      await waitForEnvd(started.address);
      const before = (await node.runtime.listManaged()).length;
      for (const [source, reason] of [
        [join(hostDir, 'escape'), 'symbolic link'],
        [join(hostDir, 'escape', 'etc'), 'symbolic link'],
        [join(dirname(hostDir), linkedID), 'symbolic link'],
        [join(dirname(hostDir), `vol_${'z'.repeat(20)}`), 'does not exist'],
      ]) {
        const refused = await channelError(node.runtime.startContainer({ ...spec(`isbescape${Date.now()}`), directories: [{ source, target: '/host' }] }));
        expect(refused.code).toBe('bad_call');
        expect(refused.message).toContain("refused by the node's policy");
        expect(refused.message).toContain(reason);
      }
      expect((await channelError(node.runtime.startContainer({ ...spec(`isbetc${Date.now()}`), directories: [{ source: '/etc', target: '/host' }] }))).code).toBe('bad_call');
      expect((await node.runtime.listManaged()).length).toBe(before); // nothing was made

      // a container of the node that the runtime did not make: no call touches it
      const run = await nodeDocker(state.nodes[0], ['run', '-d', '--name', foreign, '--entrypoint', 'sleep', BASE_IMAGE, '600']);
      expect(run.exitCode, run.stderr).toBe(0);
      for (const call of [() => node.runtime.pause(foreign), () => node.runtime.remove(foreign), () => node.runtime.commit(foreign, `tidepool/snapshot:${name}`), () => node.runtime.inspect(foreign)]) {
        const refused = await channelError(call());
        expect(refused.code).toBe('bad_call');
        expect(refused.message).toContain("is not one this node's runtime made");
      }
      const alive = await nodeDocker(state.nodes[0], ['inspect', '-f', '{{.State.Running}} {{.State.Paused}}', foreign]);
      expect(alive.stdout.trim()).toBe('true false');

      // image names: only the platform's repositories are written or removed, through either table
      const imageId = (await nodeDocker(state.nodes[0], ['image', 'inspect', '-f', '{{.Id}}', BASE_IMAGE])).stdout.trim();
      for (const call of [
        () => node.runtime.tagImage(BASE_IMAGE, 'debian:bookworm'),
        () => node.runtime.commit(started.containerId, 'debian:bookworm'),
        () => node.runtime.removeImage(BASE_IMAGE),
        () => node.runtime.removeImage(imageId),
        () => node.runtime.claimSandboxImage(BASE_IMAGE, `isbclaim${name}`),
      ]) {
        const refused = await channelError(call());
        expect(refused.code).toBe('bad_call');
        expect(refused.message).toMatch(/not in the platform's repositories|outside the platform's repositories/);
      }
      for (const [method, args] of [['tagImage', [BASE_IMAGE, 'debian:bookworm']], ['removeImage', [BASE_IMAGE]], ['removeImage', [imageId]]] as const) {
        const res = await rawRequest({ method: 'POST', path: `/v1/image/${method}`, body: JSON.stringify({ args }), cert: tls.cert, key: tls.key });
        expect(res.status).toBe(400);
        expect(JSON.parse(res.body).error.message).toContain("refused by the node's policy");
      }
      expect((await nodeDocker(state.nodes[0], ['image', 'inspect', 'debian:bookworm'])).exitCode).not.toBe(0);
      expect(await node.runtime.imageExists(BASE_IMAGE)).toBe(true);
      // the platform's own names still work
      const own = `tidepool/template:agentguard-${name}`;
      await node.runtime.tagImage(BASE_IMAGE, own);
      expect(await node.runtime.imageExists(own)).toBe(true);
      await node.runtime.removeImage(own);
      expect(await node.runtime.imageExists(own)).toBe(false);

      // the node's metrics count all of it
      const tunnel = await node.dial(started.address, ENVD_PORT);
      const scrape = await scrapeAgent();
      expect(scrape.status).toBe(200);
      expect(sample(scrape.body, 'tidepool_agent_refused_requests_total{reason="bind_source"}')).toBeGreaterThanOrEqual(4);
      expect(sample(scrape.body, 'tidepool_agent_refused_requests_total{reason="container"}')).toBeGreaterThanOrEqual(4);
      expect(sample(scrape.body, 'tidepool_agent_refused_requests_total{reason="image_name"}')).toBeGreaterThanOrEqual(8);
      expect(sample(scrape.body, 'tidepool_agent_protocol_errors_total{kind="bad_call"}')).toBeGreaterThanOrEqual(1); // the /etc bind
      expect(sample(scrape.body, 'tidepool_agent_engine_call_duration_seconds_count{operation="startContainer",outcome="success"}')).toBeGreaterThanOrEqual(1);
      expect(sample(scrape.body, 'tidepool_agent_engine_call_duration_seconds_count{operation="tagImage",outcome="success"}')).toBeGreaterThanOrEqual(1);
      expect(sample(scrape.body, 'tidepool_agent_containers{state="running",origin="create"}')).toBeGreaterThanOrEqual(1);
      const open = sample(scrape.body, 'tidepool_agent_tunnel_streams_open')!;
      expect(open).toBeGreaterThanOrEqual(1);
      tunnel.destroy();
      const deadline = Date.now() + 10_000;
      while (sample((await scrapeAgent()).body, 'tidepool_agent_tunnel_streams_open')! >= open) {
        if (Date.now() > deadline) throw new Error('the tunnel gauge did not go down after the tunnel closed');
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await rawRequest({ method: 'GET', path: '/metrics', cert: tls.cert, key: tls.key })).status).toBe(404); // not on the mTLS listener
    } finally {
      await node.runtime.remove(started.containerId);
      await nodeDocker(state.nodes[0], ['rm', '-f', foreign]);
      unlinkSync(join(hostDir, 'escape'));
      unlinkSync(join(dirname(hostDir), linkedID));
      await node.volumes!.remove(volumeID);
    }
  });

  it('removes a container whose caller gave up before it started: nothing is left half-made on the node', async () => {
    const sandboxId = `isbgaveup${Date.now()}`;
    // creating a container takes well over 200 ms here (create, start, inspect, token, rules)
    const hasty = connectRemoteNode({ nodeId: 'node1', url: state.nodes[0].agentUrl!, tls, deadlines: { startContainer: 200 } });
    const error = await channelError(hasty.runtime.startContainer(spec(sandboxId)));
    hasty.close();
    expect(error.code).toBe('deadline');
    const log = agentFiles(nodeLayout(clusterLayout(name, slot, dir), 1)).logFile;
    const deadline = Date.now() + 60_000;
    while (!readFileSync(log, 'utf8').split('\n').some((line) => line.includes(sandboxId) && line.includes('caller left before its container started')) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const lines = readFileSync(log, 'utf8').split('\n').filter((line) => line.includes(sandboxId));
    expect(lines.some((line) => line.includes('caller left before its container started'))).toBe(true);
    expect(lines.every((line) => JSON.parse(line).nodeId === 'node1')).toBe(true); // every sandbox line names its node
    const deadline2 = Date.now() + 30_000;
    while ((await node.runtime.listManaged()).some((c) => c.sandboxId === sandboxId) && Date.now() < deadline2) await new Promise((r) => setTimeout(r, 200));
    expect((await node.runtime.listManaged()).some((c) => c.sandboxId === sandboxId)).toBe(false);
    const all = await nodeDocker(state.nodes[0], ['ps', '-a', '--filter', `label=dev.tidepool.sandbox-id=${sandboxId}`, '--format', '{{.ID}}']);
    expect(all.stdout.trim()).toBe('');
  });

  it('gives the client its deadline error when the agent hangs (SIGSTOP), and works again once it continues', async () => {
    const pid = agentPid(nodeLayout(clusterLayout(name, slot, dir), 1))!;
    expect(pid).toBeGreaterThan(1);
    const impatient = connectRemoteNode({ nodeId: 'node1', url: state.nodes[0].agentUrl!, tls, deadlines: { default: 1_500 }, dialDeadlineMs: 1_500 });
    process.kill(pid, 'SIGSTOP');
    try {
      const t0 = Date.now();
      const error = await channelError(impatient.runtime.listManaged());
      expect(error.code).toBe('deadline');
      expect(error.message).toBe('node node1: listManaged: no answer within 2 s');
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect((await channelError(impatient.dial('198.19.192.2', ENVD_PORT))).code).toBe('deadline');
      expect((await channelError(impatient.capacity())).code).toBe('deadline');
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(Array.isArray(await impatient.runtime.listManaged())).toBe(true);
    impatient.close();
  });
});

describe.skipIf(!isRoot)('node channel client against an agent that answers garbage', () => {
  const garbageDir = mkdtempSync(join(tmpdir(), 'tp-node-garbage-'));
  let server: Server;
  let garbage: RemoteNode;
  let answer: (path: string) => { status: number; body: string } | 'hang' = () => ({ status: 200, body: '{}' });

  beforeAll(async () => {
    const client = await ensureClusterTls(garbageDir);
    const serverTls = await ensureNodeServerTls(garbageDir, 'garbage', '127.0.0.1');
    server = createHttpsServer({ cert: readFileSync(serverTls.cert), key: readFileSync(serverTls.key), ca: readFileSync(serverTls.ca), requestCert: true, rejectUnauthorized: true }, (req, res) => {
      req.resume();
      const reply = answer(req.url ?? '');
      if (reply === 'hang') return;
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(reply.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    garbage = connectRemoteNode({
      nodeId: 'garbage',
      url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
      tls: { ca: readFileSync(client.ca), cert: readFileSync(client.cert), key: readFileSync(client.key) },
      deadlines: { default: 1_000 },
    });
  });

  afterAll(async () => {
    garbage?.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    rmSync(garbageDir, { recursive: true, force: true });
  });

  it('turns every kind of garbage into a protocol error naming the node and the call', async () => {
    const cases: [{ status: number; body: string } | 'hang', NodeChannelError['code'], RegExp][] = [
      [{ status: 200, body: 'hello' }, 'protocol', /listManaged: answered HTTP 200 with a body that is not JSON/],
      [{ status: 200, body: '{"result": 42}' }, 'protocol', /listManaged: answered a result of the wrong shape/],
      [{ status: 200, body: '{"result": [{"containerId": "../x", "sandboxId": "s", "status": "running", "address": null, "unclaimed": false}]}' }, 'protocol', /wrong shape/],
      [{ status: 502, body: '{}' }, 'protocol', /answered HTTP 502 without a result or an error/],
      [{ status: 500, body: '{"error": {"code": "platform", "kind": "root", "message": "x"}}' }, 'protocol', /unknown kind/],
      ['hang', 'deadline', /listManaged: no answer within 1 s/],
    ];
    for (const [reply, code, message] of cases) {
      answer = () => reply;
      const error = await channelError(garbage.runtime.listManaged());
      expect(error.code, JSON.stringify(reply)).toBe(code);
      expect(error.message).toMatch(/^node garbage: /);
      expect(error.message).toMatch(message);
    }
    answer = () => ({ status: 500, body: '{"error": {"code": "platform", "kind": "limit", "message": "node full", "retryAfterSeconds": 2}}' });
    const limit = await garbage.runtime.listManaged().then(() => undefined, (e: unknown) => e);
    expect(limit).toBeInstanceOf(PlatformError);
    expect((limit as PlatformError).kind).toBe('limit');
    answer = () => ({ status: 200, body: '{"connected": false}' });
    expect((await channelError(garbage.runtime.watchEvents!(undefined, () => undefined))).message).toContain('the first line is not {"connected":true}');
    answer = () => ({ status: 200, body: '{"cpuCount": "many"}' });
    expect((await channelError(garbage.capacity())).code).toBe('protocol');
  });

  it('reports a node nobody listens at as unreachable (a tunnel once it waited for the agent to come back)', async () => {
    const material = { ca: readFileSync(join(garbageDir, 'ca.pem')), cert: readFileSync(join(garbageDir, 'client.pem')), key: readFileSync(join(garbageDir, 'client-key.pem')) };
    const gone = connectRemoteNode({ nodeId: 'gone', url: 'https://127.0.0.1:1', tls: material, agentRestartWaitMs: 1_000 });
    const error = await channelError(gone.runtime.prepare());
    expect(error.code).toBe('unreachable');
    expect(error.message).toMatch(/^node gone: prepare: connect ECONNREFUSED/);
    const started = Date.now();
    const dialError = await channelError(gone.dial('198.19.192.2', ENVD_PORT));
    expect(dialError.code).toBe('unreachable');
    expect(dialError.message).toMatch(/the agent did not take connections for 1 s \(.*ECONNREFUSED/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    gone.close();
  });
});
