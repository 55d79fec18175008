/**
 * The ip6tables half of the firewall helper's grammar (a sandbox network with IPv6): what the platform's
 * IPv6 firewall sends passes; hostile variants, and IPv4-only vocabulary (nat, ACCEPT for the platform
 * container, IPv4 addresses), are refused. The replay of everything the platform sends is in
 * apps/api/src/runtime/docker/firewall-commands-gate.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { containerCreateProblem } from './container-create-policy.ts';

const settings = { bindRoots: [], helperImage: 'tidepool/base:latest', runtimes: ['runc'] };
const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;
const RESTORE6 = 'printf "%s" "$RULES" | chroot /host ip6tables-restore -w --noflush';

function helper(script: string, env: string[] = []): Record<string, unknown> {
  return {
    Image: 'tidepool/base:latest',
    Entrypoint: ['/bin/sh', '-c', script],
    Cmd: [],
    Env: env,
    User: '0',
    Labels: { 'dev.tidepool.firewall-helper': 'true' },
    HostConfig: { NetworkMode: 'host', CapAdd: ['NET_ADMIN', 'NET_RAW'], Binds: ['/:/host'], AutoRemove: false },
  };
}
const ip6tables = (args: string[]): Record<string, unknown> => helper(`exec chroot /host ip6tables -w ${args.map(quote).join(' ')}`);
const restore6 = (rules: string): Record<string, unknown> => helper(RESTORE6, [`RULES=${rules}`]);

const NET = 'abcdef012345';
const BR = `br-${NET}`;
const HOOK = ['-i', BR, '-m', 'comment', '--comment', 'tidepool-isolation/tidepool'];
const SBX = 'TP-S-0123456789abcdef0123';

describe('ip6tables through the firewall helper', () => {
  it('accepts the commands the IPv6 firewall runs: listings, its chains, its jumps from FORWARD, DOCKER-USER and INPUT', () => {
    for (const args of [
      ['-S', 'INPUT'],
      ['-t', 'filter', '-S', 'DOCKER-USER'],
      ['-t', 'filter', '-S', 'FORWARD'],
      ['-t', 'filter', '-S', `TP-SBX-${NET}`],
      ['-t', 'filter', '-N', `TP-FWD-${NET}`],
      ['-t', 'filter', '-I', 'FORWARD', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-t', 'filter', '-I', 'DOCKER-USER', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-t', 'filter', '-D', 'FORWARD', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-t', 'filter', '-I', 'INPUT', '1', ...HOOK, '-j', `TP-IN-${NET}`],
    ]) {
      expect(containerCreateProblem(ip6tables(args), settings), args.join(' ')).toBeUndefined();
    }
  });

  it('refuses the nat table, other chains, policies, flushes, exec-capable options and jumps elsewhere', () => {
    const hostile: string[][] = [
      ['--modprobe=/host/tmp/x', '-S'],
      ['-S', 'INPUT', '--modprobe', '/bin/sh'],
      ['-t', 'nat', '-S'],
      ['-t', 'nat', '-N', `TP-NAT-${NET}`],
      ['-t', 'nat', '-I', 'PREROUTING', '1', ...HOOK, '-j', `TP-NAT-${NET}`],
      ['-t', 'mangle', '-S'],
      ['-t', 'raw', '-S'],
      ['-F', 'FORWARD'],
      ['-F', 'INPUT'],
      ['-F'],
      ['-P', 'FORWARD', 'ACCEPT'],
      ['-P', 'INPUT', 'ACCEPT'],
      ['-A', 'FORWARD', '-j', 'ACCEPT'],
      ['-I', 'FORWARD', '1', '-j', 'ACCEPT'],
      ['-I', 'FORWARD', '1', ...HOOK, '-j', 'ACCEPT'],
      ['-I', 'FORWARD', '1', ...HOOK, '-j', `TP-IN-${NET}`],
      ['-I', 'INPUT', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-I', 'FORWARD', '1', '-i', 'eth0', '-m', 'comment', '--comment', 'tidepool-isolation/tidepool', '-j', `TP-FWD-${NET}`],
      ['-I', 'OUTPUT', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-D', 'FORWARD', '1'],
      ['-N', 'MINE'],
      ['-X', `TP-FWD-${NET}`],
    ];
    for (const args of hostile) expect(containerCreateProblem(ip6tables(args), settings), JSON.stringify(args)).toMatch(/firewall helper refused/);
  });

  it('accepts the payloads the IPv6 firewall writes: network chains with neighbour discovery, a sandbox chain and its dispatch', () => {
    const install = [
      '*filter',
      `:TP-FWD-${NET} - [0:0]`,
      `:TP-IN-${NET} - [0:0]`,
      `-A TP-FWD-${NET} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A TP-FWD-${NET} -p ipv6-icmp -m icmp6 --icmpv6-type 135 -j RETURN`,
      `-A TP-FWD-${NET} -p ipv6-icmp -m icmp6 --icmpv6-type 136 -j RETURN`,
      `-A TP-FWD-${NET} -o ${BR} -p tcp -j REJECT --reject-with tcp-reset`,
      `-A TP-FWD-${NET} -o ${BR} -j REJECT --reject-with icmp6-port-unreachable`,
      `-A TP-FWD-${NET} -d 2001:db8::53/128 -p udp --dport 53 -j RETURN`,
      `-A TP-FWD-${NET} -d fc00::/7 -j REJECT --reject-with icmp6-port-unreachable`,
      `-A TP-FWD-${NET} -d 64:ff9b::a00:0/104 -p tcp -j REJECT --reject-with tcp-reset`,
      `-A TP-FWD-${NET} -j TP-SBX-${NET}`,
      `-A TP-IN-${NET} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
      `-A TP-IN-${NET} -j REJECT --reject-with icmp6-port-unreachable`,
      'COMMIT',
      '',
    ].join('\n');
    expect(containerCreateProblem(restore6(install), settings)).toBeUndefined();
    const sandbox = [
      '*filter',
      `:${SBX} - [0:0]`,
      `-A ${SBX} -d 2001:2::/48 -j RETURN`,
      `-A ${SBX} -d ::/0 -p tcp -j REJECT --reject-with tcp-reset`,
      `-D TP-SBX-${NET} -s fd00:7d:1::7/128 -m comment --comment "tidepool-sandbox/isbx1" -j TP-S-0123456789abcdef0000`,
      `-A TP-SBX-${NET} -s fd00:7d:1::7/128 -m comment --comment tidepool-sandbox/isbx1 -j ${SBX}`,
      'COMMIT',
      '',
    ].join('\n');
    expect(containerCreateProblem(restore6(sandbox), settings)).toBeUndefined();
    expect(containerCreateProblem(restore6(`*filter\n-F ${SBX}\n-X ${SBX}\nCOMMIT\n`), settings)).toBeUndefined();
  });

  it('refuses IPv6 payloads outside that grammar, IPv4-only vocabulary included', () => {
    const hostile = [
      '*nat\nCOMMIT\n',
      `*nat\n:TP-R-abc - [0:0]\n-A TP-R-abc -p tcp --dport 80 -j REDIRECT --to-ports 40000\nCOMMIT\n`,
      '*filter\n-F FORWARD\nCOMMIT\n',
      '*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n',
      '*filter\n-A FORWARD -j ACCEPT\nCOMMIT\n',
      `*filter\n-A TP-FWD-${NET} -j ACCEPT\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -s fd00::2/128 -m mac --mac-source 02:42:ac:1e:00:02 -j ACCEPT\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d 10.0.0.0/8 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d fd00::/129 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d fe80::1%eth0 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d fd00:::1/64 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j REJECT --reject-with icmp6-adm-prohibited\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p ipv6-icmp -m icmp6 --icmpv6-type echo-request -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p tcp -m icmp6 --icmpv6-type 135 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m icmp6 --icmpv6-type 135 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p ipv6-icmp --dport 53 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p icmp -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m rt --rt-type 0 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j DROP --modprobe=/tmp/x\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j TP-NAT-${NET}\nCOMMIT\n`,
      '*mangle\nCOMMIT\n',
      '*filter\nCOMMIT\n*filter\n-F INPUT\nCOMMIT\n',
    ];
    for (const rules of hostile) expect(containerCreateProblem(restore6(rules), settings), JSON.stringify(rules)).toMatch(/firewall helper refused/);
  });

  it('keeps the families apart: IPv6 rules through iptables-restore and IPv4 nat through ip6tables are refused', () => {
    const v6rule = `*filter\n:${SBX} - [0:0]\n-A ${SBX} -d 2001:2::/48 -j RETURN\nCOMMIT\n`;
    expect(containerCreateProblem(restore6(v6rule), settings)).toBeUndefined();
    expect(containerCreateProblem(helper('printf "%s" "$RULES" | chroot /host iptables-restore -w --noflush', [`RULES=${v6rule}`]), settings)).toMatch(/firewall helper refused/);
    expect(containerCreateProblem(helper(RESTORE6, ['RULES=*filter\nCOMMIT\n', 'X=1']), settings)).toMatch(/firewall helper refused/);
    expect(containerCreateProblem(helper(`${RESTORE6} ; sh`, ['RULES=*filter\nCOMMIT\n']), settings)).toMatch(/firewall helper refused/);
  });
});
