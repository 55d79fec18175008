/**
 * A sandbox network with IPv6 (a unique-local /64 the test makes): the isolation and egress rules hold over
 * IPv6 too (ip6tables), through the real platform and the e2b SDK. Docker's own switch for traffic between
 * containers does nothing over IPv6 on this engine, so without these rules a sandbox reaches its neighbours and
 * the host there. Probed only: the test's sandboxes, the network's own gateway address (where the test listens
 * itself), and stand-in hosts in a network namespace the test makes (2001:2::/48, the IPv6 benchmarking range,
 * and one unique-local address). Also: where ip6tables cannot run, no sandbox starts on such a network.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import net from 'node:net';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { DockerRuntime } from '../src/runtime/docker/docker-runtime.ts';
import { sandboxChain } from '../src/runtime/docker/sandbox-firewall.ts';
import { MANAGED_NETWORK_LABEL } from '@tidepool/protocol/docker-labels';
import { ICC_OPTION } from '../src/runtime/docker/sandbox-network.ts';
import { type Probe, REFUSED, tcpProbe } from './support/sandbox-probes.ts';
import { type StandinHostsV6, startStandinHostsV6 } from './support/standin-hosts-v6.ts';
import { removeLabelled, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const docker = new Docker();
const NETWORK = 'tidepool-ipv6-test';
const PREFIX = `fd00:7d:${randomBytes(2).toString('hex').replace(/^0+/, '') || '1'}`;
const GATEWAY6 = `${PREFIX}::1`;

let platform: TestPlatform;
let standin: StandinHostsV6;
let networkId = '';
let a: Sandbox;
let b: Sandbox;
let hostServer: net.Server;
let hostPort = 0;

const create = (options: Record<string, unknown> = {}): Promise<Sandbox> => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, ...options });

/** The sandbox's IPv6 address as the engine gave it. */
async function ipv6Of(sbx: Sandbox): Promise<string> {
  const info = await docker.getContainer(platform.lifecycle.get(sbx.sandboxId)!.containerId!).inspect();
  return info.NetworkSettings.Networks[NETWORK]!.GlobalIPv6Address;
}

function expectClosed(probe: Probe): void {
  // Refused (reset or unreachable), not left to time out (REFUSED says how that shows).
  expect(probe.open).toBe(false);
  expect(probe.error).toMatch(REFUSED);
}

async function reaches(sbx: Sandbox, address: string): Promise<boolean> {
  const probe = await tcpProbe(sbx, address, 8099);
  if (!probe.open) expect(probe.error).toMatch(REFUSED);
  return probe.open && probe.output === `hi ${address}`;
}

const reachability = async (sbx: Sandbox): Promise<[boolean, boolean]> => [await reaches(sbx, standin.internet[0]), await reaches(sbx, standin.internet[1])];

/** The bridge's own address answers only once duplicate address detection is over. */
async function waitForGatewayAddress(bridge: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const { stdout } = await exec('ip', ['-6', 'addr', 'show', 'dev', bridge]);
    if (stdout.includes(GATEWAY6) && !/tentative/.test(stdout.split('\n').find((l) => l.includes(GATEWAY6)) ?? '')) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${GATEWAY6} on ${bridge} stayed tentative`);
}

async function tagged(program: string, chain: string): Promise<string[]> {
  const { stdout } = await exec(program, ['-w', '-S', chain]);
  return stdout.split('\n').filter((l) => l.includes(`tidepool-isolation/${NETWORK}`));
}

/** Removes what the platform installed for the test's network (its hooks and chains, both families). */
async function removeNetworkRules(id: string): Promise<void> {
  const short = id.slice(0, 12);
  for (const program of ['iptables', 'ip6tables']) {
    for (const [table, builtin] of [['filter', 'DOCKER-USER'], ['filter', 'FORWARD'], ['filter', 'INPUT'], ['nat', 'PREROUTING']] as const) {
      const lines = await exec(program, ['-w', '-t', table, '-S', builtin]).then(({ stdout }) => stdout.split('\n'), () => [] as string[]);
      for (const line of lines.filter((l) => l.includes(`-j TP-`) && l.includes(short))) {
        await exec(program, ['-w', '-t', table, '-D', builtin, ...line.replace(/"/g, '').split(' ').slice(2)]).catch(() => undefined);
      }
    }
    for (const [table, chain] of [['filter', `TP-FWD-${short}`], ['filter', `TP-IN-${short}`], ['filter', `TP-SBX-${short}`], ['nat', `TP-NAT-${short}`]] as const) {
      await exec(program, ['-w', '-t', table, '-F', chain]).catch(() => undefined);
      await exec(program, ['-w', '-t', table, '-X', chain]).catch(() => undefined);
    }
  }
}

beforeAll(async () => {
  const old = await docker.getNetwork(NETWORK).inspect().catch(() => undefined);
  if (old) {
    await removeNetworkRules(old.Id);
    await docker.getNetwork(NETWORK).remove();
  }
  const made = await docker.createNetwork({
    Name: NETWORK,
    Driver: 'bridge',
    EnableIPv6: true,
    IPAM: { Config: [{ Subnet: `${PREFIX}::/64` }] },
    Labels: { [MANAGED_NETWORK_LABEL]: 'true' },
    Options: { [ICC_OPTION]: 'false' },
  });
  networkId = made.id;
  platform = await startTestPlatform({ sandboxNetwork: NETWORK });
  standin = await startStandinHostsV6(randomInt(16, 255));
  [a, b] = await Promise.all([create(), create()]);
  await b.commands.run('python3 -m http.server 8080 --bind :: >/dev/null 2>&1', { background: true });
  await b.commands.run('for i in $(seq 50); do (echo > /dev/tcp/::1/8080) 2>/dev/null && exit 0; sleep 0.1; done; exit 1');
  await waitForGatewayAddress(`br-${networkId.slice(0, 12)}`);
  hostServer = net.createServer((socket) => socket.end('host\n'));
  await new Promise<void>((resolve) => hostServer.listen(0, GATEWAY6, resolve));
  hostPort = (hostServer.address() as net.AddressInfo).port;
}, 600_000);

afterAll(async () => {
  hostServer?.close();
  await standin?.stop();
  await platform?.dispose();
  if (networkId) {
    await removeNetworkRules(networkId);
    await docker.getNetwork(networkId).remove().catch(() => undefined);
  }
});

describe('IPv6 sandbox network isolation (ip6tables)', () => {
  it('gives sandboxes IPv6 addresses and hooks its ip6tables chains into FORWARD (or DOCKER-USER) and INPUT once', async () => {
    expect(await ipv6Of(a)).toMatch(new RegExp(`^${PREFIX}::`));
    expect(await ipv6Of(b)).toMatch(new RegExp(`^${PREFIX}::`));
    const forward = [...(await tagged('ip6tables', 'FORWARD')), ...(await tagged('ip6tables', 'DOCKER-USER').catch(() => []))];
    expect(forward).toHaveLength(1);
    expect(await tagged('ip6tables', 'INPUT')).toHaveLength(1);
    const { stdout } = await exec('ip6tables', ['-w', '-S', `TP-SBX-${networkId.slice(0, 12)}`]);
    expect(stdout).toContain(`-s ${await ipv6Of(a)}/128`);
  });

  it("refuses IPv6 connections to a neighbour's envd and service ports", async () => {
    const bAddress = await ipv6Of(b);
    // b's server answers over IPv6 inside b.
    expect((await tcpProbe(b, bAddress, 8080)).open).toBe(true);
    for (const port of [49983, 8080]) expectClosed(await tcpProbe(a, bAddress, port));
    expectClosed(await tcpProbe(b, await ipv6Of(a), 49983));
  });

  it("refuses IPv6 connections to the host on the network's gateway address", async () => {
    const fromHost = await new Promise<boolean>((resolve) => net.connect(hostPort, GATEWAY6, () => resolve(true)).on('error', () => resolve(false)));
    expect(fromHost).toBe(true);
    expectClosed(await tcpProbe(a, GATEWAY6, hostPort));
  });

  it('reaches IPv6 hosts outside by default; never a unique-local one, even when allowed', async () => {
    expect(await reachability(a)).toEqual([true, true]);
    expect(await reaches(a, standin.uniqueLocal)).toBe(false);
    const allowedPrivate = await create({ network: { allowOut: [standin.uniqueLocal] } });
    expect(await reaches(allowedPrivate, standin.uniqueLocal)).toBe(false);
    await allowedPrivate.kill();
  });

  it('enforces IPv6 denyOut, allowOut over ::/0, and allowInternetAccess: false', async () => {
    const [denied, onlyFirst, offline] = await Promise.all([
      create({ network: { denyOut: ['2001:2::/48'] } }),
      create({ network: { allowOut: [standin.internet[0]], denyOut: ['::/0'] } }),
      create({ allowInternetAccess: false }),
    ]);
    expect(await reachability(denied)).toEqual([false, false]);
    expect(await reachability(onlyFirst)).toEqual([true, false]);
    expect(await reachability(offline)).toEqual([false, false]);
    await Promise.all([denied, onlyFirst, offline].map((s) => s.kill()));
  });

  it('PUT /network changes the IPv6 rules live, and a killed sandbox leaves no ip6tables rules', async () => {
    const sbx = await create();
    const chain = sandboxChain(sbx.sandboxId);
    expect(await reachability(sbx)).toEqual([true, true]);
    await sbx.updateNetwork({ denyOut: ['0.0.0.0/0'], allowOut: [standin.internet[1]] });
    expect(await reachability(sbx)).toEqual([false, true]);
    await sbx.updateNetwork({});
    expect(await reachability(sbx)).toEqual([true, true]);
    expect((await exec('ip6tables', ['-w', '-S'])).stdout).toContain(`-N ${chain}`);
    await sbx.kill();
    const after = (await exec('ip6tables', ['-w', '-S'])).stdout;
    expect(after).not.toContain(`-N ${chain}`);
    expect(after).not.toContain(`tidepool-sandbox/${sbx.sandboxId}`);
  });
});

describe('an IPv6 sandbox network where ip6tables cannot run', () => {
  it('starts no sandbox there, with a message that says why and what to do; nothing is left behind', async () => {
    const platformId = `ipv6-refusal-${randomBytes(4).toString('hex')}`;
    const runtime = new DockerRuntime({
      network: NETWORK,
      logger: pino({ level: 'silent' }),
      platformId,
      isolation: 'require',
      firewallPrograms: { ipv6: { iptables: 'ip6tables-missing-for-test', restore: 'ip6tables-restore-missing-for-test' } },
    });
    const refusing = await startTestPlatform({ sandboxNetwork: NETWORK }, undefined, { runtime });
    try {
      const error = await Sandbox.create('base', { ...refusing.sdk, timeoutMs: 60_000 }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(error?.message).toMatch(/has IPv6 but its ip6tables rules cannot be installed/);
      expect(error?.message).toMatch(/apt-get install iptables/);
      expect(await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platformId}`] } })).toEqual([]);
      // The working platform on the same network is not affected.
      expect((await a.commands.run('echo still')).stdout).toBe('still\n');
    } finally {
      await refusing.dispose();
      await removeLabelled(platformId);
    }
  });
});
