/**
 * Sandboxes are isolated from each other, from the host and the platform, and from private and link-local
 * ranges: only the platform reaches envd and sandbox ports. Everything here goes through the real platform
 * and the e2b SDK; the only addresses probed are the test's own (the sandboxes, the bridge gateway where the
 * test listens itself, and stand-in hosts in a network namespace the test creates).
 */
import net from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '@tidepool/testkit';
import { type Probe, REFUSED, tcpProbe } from './support/sandbox-probes.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const NETWORK = 'tidepool-isolation-test';
const docker = new Docker();

let platform: TestPlatform;
let a: Sandbox;
let b: Sandbox;
let gateway = '';
let hostServer: net.Server;
let hostPort = 0;
let standin: StandinHosts;

const addressOf = (sbx: Sandbox): string => platform.lifecycle.get(sbx.sandboxId)!.address!;
const apiPort = (): number => Number(new URL(platform.url).port);

function expectClosed(probe: Probe): void {
  // Refused, not left to time out (REFUSED says how that shows).
  expect(probe.open).toBe(false);
  expect(probe.error).toMatch(REFUSED);
}

async function throughProxy(sbx: Sandbox, port: number): Promise<number> {
  const response = await fetch(`${platform.url}/`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port) } });
  await response.arrayBuffer();
  return response.status;
}

async function serve(sbx: Sandbox): Promise<void> {
  await sbx.commands.run('python3 -m http.server 8080 --bind 0.0.0.0 >/dev/null 2>&1', { background: true });
  await sbx.commands.run('for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/8080) 2>/dev/null && exit 0; sleep 0.1; done; exit 1');
}

/** A made before isolation existed: inter-container traffic on, no containers. The platform makes it again. */
async function oldStyleNetwork(): Promise<void> {
  await docker.getNetwork(NETWORK).remove().catch(() => undefined);
  await docker.createNetwork({ Name: NETWORK, Driver: 'bridge', Labels: { 'dev.tidepool.managed': 'true' } });
}

beforeAll(async () => {
  await ensureBaseImage();
  await oldStyleNetwork();
  platform = await startTestPlatform({ host: '0.0.0.0', sandboxNetwork: NETWORK });
  const info = await docker.getNetwork(NETWORK).inspect();
  expect(info.Options?.['com.docker.network.bridge.enable_icc']).toBe('false');
  gateway = info.IPAM?.Config?.[0]?.Gateway ?? '';
  hostServer = net.createServer((socket) => socket.end('host\n'));
  await new Promise<void>((resolve) => hostServer.listen(0, gateway, resolve));
  hostPort = (hostServer.address() as net.AddressInfo).port;
  standin = await startStandinHosts(1);
  [a, b] = await Promise.all([0, 1].map(() => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 })));
  await serve(b);
}, 600_000);

afterAll(async () => {
  hostServer?.close();
  await standin?.stop();
  await platform?.dispose();
});

describe('sandbox network isolation', () => {
  it('installs its rules in DOCKER-USER and INPUT under a stable tag', async () => {
    const { stdout: forward } = await exec('iptables', ['-w', '-S', 'DOCKER-USER']);
    const { stdout: input } = await exec('iptables', ['-w', '-S', 'INPUT']);
    expect(forward.split('\n').filter((l) => l.includes(`tidepool-isolation/${NETWORK}`))).toHaveLength(1);
    expect(input.split('\n').filter((l) => l.includes(`tidepool-isolation/${NETWORK}`))).toHaveLength(1);
  });

  it('lets the platform reach every sandbox: envd and any port, through the proxy', async () => {
    expect((await a.commands.run('echo a')).stdout).toBe('a\n');
    expect((await b.commands.run('echo b')).stdout).toBe('b\n');
    expect(await throughProxy(b, 8080)).toBe(200);
  });

  it('refuses connections from one sandbox to another, envd and service ports alike', async () => {
    for (const port of [49983, 8080, 22]) expectClosed(await tcpProbe(a, addressOf(b), port));
    expectClosed(await tcpProbe(b, addressOf(a), 49983));
  });

  it("cannot resolve a neighbour's ID through Docker's embedded DNS; its own hostname and outside names resolve", async () => {
    const getent = async (sbx: Sandbox, name: string): Promise<number> =>
      (await sbx.commands.run(`getent hosts '${name}'`).catch((error: { exitCode?: number }) => error)).exitCode ?? -1;
    for (const name of [b.sandboxId, `tidepool-${b.sandboxId}`, `${b.sandboxId}.${NETWORK}`]) expect(await getent(a, name)).not.toBe(0);
    // The container's names on the network (name, hostname, aliases) are all DNS names there: none may carry the ID.
    const b2 = platform.lifecycle.get(b.sandboxId)!;
    const info = await docker.getContainer(b2.containerId!).inspect();
    const dnsNames = [info.Name.replace(/^\//, ''), info.Config.Hostname, ...(info.NetworkSettings.Networks[NETWORK]?.Aliases ?? [])];
    for (const name of dnsNames) expect(name.toLowerCase()).not.toContain(b.sandboxId.toLowerCase());
    const own = await a.commands.run('getent hosts "$(hostname)"');
    expect(own.stdout).toContain(addressOf(a));
    expect((await a.commands.run('getent hosts registry.npmjs.org')).stdout).toMatch(/^\S+\s+registry\.npmjs\.org/m);
  });

  it('refuses connections to the host and the platform (bridge gateway, the API port)', async () => {
    // The host itself reaches the server the sandbox may not.
    const fromHost = await new Promise<boolean>((resolve) => net.connect(hostPort, gateway, () => resolve(true)).on('error', () => resolve(false)));
    expect(fromHost).toBe(true);
    expectClosed(await tcpProbe(a, gateway, hostPort));
    expectClosed(await tcpProbe(a, gateway, apiPort()));
  });

  it('refuses private and link-local ranges but reaches the outside', async () => {
    const reachable = await tcpProbe(a, standin.internet[0], 8099);
    expect(reachable).toMatchObject({ open: true, output: `hi ${standin.internet[0]}` });
    for (const address of standin.privateAddresses) expectClosed(await tcpProbe(a, address, 8099));
  });

  it('keeps isolation across pause/resume (memory and filesystem) and restarts the proxy path', async () => {
    await b.pause();
    await Sandbox.connect(b.sandboxId, platform.sdk);
    expectClosed(await tcpProbe(a, addressOf(b), 49983));
    expect((await api(platform, 'POST', `/sandboxes/${a.sandboxId}/pause`, { memory: false })).status).toBe(204);
    expect(platform.lifecycle.get(a.sandboxId)!.pausedImage).not.toBeNull();
    a = await Sandbox.connect(a.sandboxId, platform.sdk);
    expectClosed(await tcpProbe(a, addressOf(b), 49983));
    expectClosed(await tcpProbe(b, addressOf(a), 49983));
    expectClosed(await tcpProbe(a, gateway, hostPort));
    expect((await tcpProbe(a, standin.internet[0], 8099)).open).toBe(true);
    expect(await throughProxy(b, 8080)).toBe(200);
  });

  it('keeps isolation after an API restart (the rules are re-installed, the sandboxes adopted)', async () => {
    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ host: '0.0.0.0', sandboxNetwork: NETWORK, apiKeys: [apiKey] }, dataDir);
    a = await Sandbox.connect(a.sandboxId, platform.sdk);
    b = await Sandbox.connect(b.sandboxId, platform.sdk);
    expectClosed(await tcpProbe(a, addressOf(b), 49983));
    expectClosed(await tcpProbe(a, gateway, apiPort()));
    expectClosed(await tcpProbe(a, standin.privateAddresses[0]!, 8099));
    expect((await tcpProbe(a, standin.internet[0], 8099)).open).toBe(true);
    expect(await throughProxy(b, 8080)).toBe(200);
  });
});
