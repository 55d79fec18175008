/**
 * Every helper container the platform's firewall code creates (EngineFirewallCommands driven by
 * SandboxFirewall, with representative networks, peers, resolvers, egress policies and stale rules left
 * in the listings) is recorded at the Docker client and replayed through the docker gate's create policy:
 * the gate must admit each one. The hostile variants it must refuse are in
 * apps/docker-gate/src/firewall-helper-scripts.test.ts.
 */
import type Docker from 'dockerode';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { containerCreateProblem } from '../../../../docker-gate/src/container-create-policy.ts';
import { EngineFirewallCommands, FIREWALL_PROGRAMS } from './firewall-commands.ts';
import { SandboxFirewall, sandboxChain } from './sandbox-firewall.ts';

const HELPER_IMAGE = 'tidepool-compose/base:latest';
const NETWORK_ID = '3f1c2a9b8e7d6c5b4a3928171605f4e3d2c1b0a99887766554433221100ffeed';
const SHORT = NETWORK_ID.slice(0, 12);
const BRIDGE = `br-${SHORT}`;

type Body = { Entrypoint: string[]; Env: string[] };

/** `text` as the engine sends a container's stdout without a TTY: one frame with its 8-byte header. */
function stdoutFrame(text: string): Buffer {
  const header = Buffer.alloc(8);
  header[0] = 1;
  header.writeUInt32BE(Buffer.byteLength(text), 4);
  return Buffer.concat([header, Buffer.from(text)]);
}

/** A Docker client that records container creates and answers `iptables -S` with the listing for its arguments (null: the command fails). */
function recordingDocker(listings: Record<string, string | null>): { docker: Docker; bodies: Body[] } {
  const bodies: Body[] = [];
  const docker = {
    createContainer: async (body: Body) => {
      bodies.push(body);
      const script = body.Entrypoint[2] ?? '';
      const listing = listings[script.replace(/^exec chroot \/host ip6?tables -w /, '')];
      return {
        start: async () => undefined,
        wait: async () => ({ StatusCode: listing === null ? 1 : 0 }),
        logs: async () => stdoutFrame(listing ?? ''),
        remove: async () => undefined,
      };
    },
  } as unknown as Docker;
  return { docker, bodies };
}

const q = (...args: string[]): string => args.map((a) => `'${a}'`).join(' ');

describe('what the platform sends its firewall helper passes the docker gate', () => {
  it('install, egress rules with and without domains, stale rules and removal', async () => {
    const staleSandbox = sandboxChain('isbx-old');
    const listings: Record<string, string | null> = {
      [q('-t', 'filter', '-S', 'DOCKER-USER')]: [
        '-N DOCKER-USER',
        `-A DOCKER-USER -i ${BRIDGE} -m comment --comment "tidepool-isolation/tidepool-compose-sandboxes" -j TP-FWD-${SHORT}`,
        '-A DOCKER-USER -i br-0a0b0c0d0e0f -m comment --comment tidepool-isolation/tidepool-compose-sandboxes -j TP-FWD-0a0b0c0d0e0f',
        '-A DOCKER-USER -j RETURN',
      ].join('\n'),
      [q('-t', 'filter', '-S', 'INPUT')]: ['-P INPUT ACCEPT', '-A INPUT -i br-0a0b0c0d0e0f -m comment --comment "tidepool-isolation/tidepool-compose-sandboxes" -j TP-IN-0a0b0c0d0e0f'].join('\n'),
      [q('-t', 'filter', '-S', `TP-SBX-${SHORT}`)]: [
        `-N TP-SBX-${SHORT}`,
        `-A TP-SBX-${SHORT} -s 172.30.0.7/32 -m comment --comment "tidepool-sandbox/isbx1" -j ${staleSandbox}`,
        `-A TP-SBX-${SHORT} -s 172.30.0.9/32 -m comment --comment tidepool-sandbox/isbx2 -j ${sandboxChain('isbx2')}`,
      ].join('\n'),
      [q('-t', 'nat', '-S', `TP-NAT-${SHORT}`)]: [`-N TP-NAT-${SHORT}`, `-A TP-NAT-${SHORT} -s 172.30.0.7/32 -m comment --comment "tidepool-sandbox/isbx1" -j ${sandboxChain('isbx1', 'TP-R-')}`].join('\n'),
      [q('-t', 'filter', '-S', sandboxChain('isbx2'))]: `-N ${sandboxChain('isbx2')}\n`,
      [q('-t', 'nat', '-S', sandboxChain('isbx2', 'TP-R-'))]: `-N ${sandboxChain('isbx2', 'TP-R-')}\n`,
      // A chain that is not there: iptables -S <chain> fails.
      [q('-t', 'filter', '-S', sandboxChain('isbx-never'))]: null,
      [q('-t', 'nat', '-S', sandboxChain('isbx-never', 'TP-R-'))]: null,
      [q('-t', 'filter', '-N', `TP-FWD-${SHORT}`)]: '',
    };
    const { docker, bodies } = recordingDocker(listings);
    const commands = new EngineFirewallCommands(docker, HELPER_IMAGE);
    // sandbox-network.ts: the probe that picks the helper, and the resolver files.
    await commands.iptables(['-S', 'DOCKER-USER']);
    await commands.hostFile('/etc/resolv.conf');
    await commands.hostFile('/run/systemd/resolve/resolv.conf');
    const firewall = new SandboxFirewall({
      commands,
      logger: pino({ level: 'silent' }),
      network: { name: 'tidepool-compose-sandboxes', id: NETWORK_ID, bridge: BRIDGE },
      resolvers: ['10.9.9.9', '192.168.1.1'],
      peer: { address: '172.30.0.2', mac: '02:42:ac:1e:00:02' },
    });
    await firewall.install();
    await firewall.applySandbox('isbx1', '172.30.0.7', { allow: ['1.1.1.1/32', '8.8.8.0/24'], deny: ['0.0.0.0/0', '203.0.113.0/24'] });
    firewall.setRedirect({ http: 40123, tls: 40124 });
    await firewall.applySandbox('isbx1', '172.30.0.7', { allow: ['1.1.1.1/32'], deny: ['0.0.0.0/0'], domains: ['example.com', '*.example.org'] });
    await firewall.applySandbox('isbx3', '172.30.0.11', { allow: [], deny: [] });
    await firewall.removeSandbox('isbx2');
    await firewall.removeSandbox('isbx-never');
    expect(await firewall.sandboxesWithRules()).toEqual(['isbx1', 'isbx2']);
    // Also a firewall of a network without a peer or resolvers (the platform on the host through the gate).
    await new SandboxFirewall({ commands, logger: pino({ level: 'silent' }), network: { name: 'tidepool', id: 'a'.repeat(64), bridge: 'br-aaaaaaaaaaaa' }, resolvers: [] }).install();

    const scripts = bodies.map((b) => b.Entrypoint[2]!);
    const restores = bodies.filter((b) => b.Env.length > 0).map((b) => b.Env[0]!);
    // The recording saw every kind of call (so the replay below cannot pass on an empty list).
    expect(scripts.filter((s) => s.includes("'-I'")).length).toBe(5); // one hook was already in place
    expect(scripts.filter((s) => s.includes("'-D'")).length).toBe(2);
    expect(scripts.filter((s) => s.includes("'-N'")).length).toBe(8);
    expect(restores.length).toBe(6);
    expect(restores.some((r) => r.includes('-j REDIRECT --to-ports 40124') && r.includes('-D TP-SBX-') && r.includes('"tidepool-sandbox/isbx1"'))).toBe(true);
    expect(restores.some((r) => r.includes('-F TP-S-') && r.includes('-X TP-R-'))).toBe(true);
    expect(scripts.filter((s) => s.startsWith('cat /host')).length).toBe(2);

    const settings = { bindRoots: [], helperImage: HELPER_IMAGE, runtimes: ['runc'] };
    for (const body of bodies) expect(containerCreateProblem(body, settings), JSON.stringify(body)).toBeUndefined();
  });

  it('the IPv6 firewall (ip6tables): install hooked to FORWARD, then DOCKER-USER, egress rules, stale dispatch and removal', async () => {
    const sandboxV6 = sandboxChain('isbx1');
    const listings: Record<string, string | null> = {
      // Docker made no ip6tables chains: the forward hook goes into FORWARD, where it already is.
      [q('-t', 'filter', '-S', 'DOCKER-USER')]: null,
      [q('-t', 'filter', '-S', `TP-SBX-${SHORT}`)]: [
        `-N TP-SBX-${SHORT}`,
        `-A TP-SBX-${SHORT} -s fd00:7d:1::7/128 -m comment --comment "tidepool-sandbox/isbx1" -j ${sandboxV6}`,
        `-A TP-SBX-${SHORT} -s fd00:7d:1::9/128 -m comment --comment tidepool-sandbox/isbx2 -j ${sandboxChain('isbx2')}`,
      ].join('\n'),
      [q('-t', 'filter', '-S', 'FORWARD')]: ['-P FORWARD ACCEPT', `-A FORWARD -i ${BRIDGE} -m comment --comment "tidepool-isolation/tidepool-compose-sandboxes" -j TP-FWD-${SHORT}`].join('\n'),
      [q('-t', 'filter', '-S', sandboxChain('isbx2'))]: `-N ${sandboxChain('isbx2')}\n`,
    };
    const { docker, bodies } = recordingDocker(listings);
    const commands = new EngineFirewallCommands(docker, HELPER_IMAGE, FIREWALL_PROGRAMS.ipv6);
    await commands.iptables(['-S', 'INPUT']);
    const make = () =>
      new SandboxFirewall({ commands, family: 'ipv6', logger: pino({ level: 'silent' }), network: { name: 'tidepool-compose-sandboxes', id: NETWORK_ID, bridge: BRIDGE }, resolvers: ['10.9.9.9', '2001:db8::53'] });
    const firewall = make();
    await firewall.install();
    await firewall.applySandbox('isbx1', 'fd00:7d:1::7', { allow: ['1.1.1.1/32', '2001:2::/48'], deny: ['0.0.0.0/0', '2001:db8::/32'], domains: ['example.com'] });
    await firewall.applySandbox('isbx3', 'fd00:7d:1::b', { allow: [], deny: [] });
    await firewall.removeSandbox('isbx2');
    // Docker's own ip6tables support turned on later: DOCKER-USER exists, and the old FORWARD hook goes.
    listings[q('-t', 'filter', '-S', 'DOCKER-USER')] = '-N DOCKER-USER\n-A DOCKER-USER -j RETURN';
    await make().install();

    const scripts = bodies.map((b) => b.Entrypoint[2]!);
    const restores = bodies.filter((b) => b.Env.length > 0).map((b) => b.Env[0]!);
    expect(scripts.every((s) => s.startsWith('exec chroot /host ip6tables -w ') || s.includes('chroot /host ip6tables-restore -w --noflush'))).toBe(true);
    expect(scripts.filter((s) => s.includes("'-I'")).map((s) => s.split(' ')[8])).toEqual(["'INPUT'", "'DOCKER-USER'", "'INPUT'"]);
    expect(scripts.some((s) => s.includes("'-D' 'FORWARD'"))).toBe(true);
    expect(restores.some((r) => r.includes('--icmpv6-type 135') && r.includes('-d 2001:db8::53/128 -p udp --dport 53 -j RETURN') && r.includes('-d fc00::/7'))).toBe(true);
    // allowInternetAccess: false (0.0.0.0/0 denied) denies IPv6 too; IPv4 CIDRs stay out of ip6tables.
    expect(restores.some((r) => r.includes('-d 2001:2::/48 -j RETURN') && r.includes('-d ::/0 -p tcp -j REJECT') && r.includes('-d 2001:db8::/32') && !r.includes('1.1.1.1'))).toBe(true);
    expect(restores.some((r) => r.includes('*nat'))).toBe(false);
    expect(restores.some((r) => r.includes('-F TP-S-'))).toBe(true);

    const settings = { bindRoots: [], helperImage: HELPER_IMAGE, runtimes: ['runc'] };
    for (const body of bodies) expect(containerCreateProblem(body, settings), JSON.stringify(body)).toBeUndefined();
  });
});
