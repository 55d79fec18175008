import { describe, expect, it } from 'vitest';
import { containerCreateProblem } from './container-create-policy.ts';
import { insertedHookNetwork } from './firewall-helper-shape.ts';
import { MAX_RESTORE_LINE } from './iptables-commands.ts';

const settings = { bindRoots: [], helperImage: 'tidepool/base:latest', runtimes: ['runc'] };
const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;
const RESTORE = 'printf "%s" "$RULES" | chroot /host iptables-restore -w --noflush';

/** The helper container exactly as firewall-commands.ts makes it, running `script`. */
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
const iptables = (args: string[]): Record<string, unknown> => helper(`exec chroot /host iptables -w ${args.map(quote).join(' ')}`);
const restore = (rules: string): Record<string, unknown> => helper(RESTORE, [`RULES=${rules}`]);

const NET = 'abcdef012345';
const BR = `br-${NET}`;
const HOOK = ['-i', BR, '-m', 'comment', '--comment', 'tidepool-isolation/tidepool'];

describe('the firewall helper runs only the iptables commands the platform makes', () => {
  it('accepts the platform vocabulary', () => {
    for (const args of [
      ['-S', 'DOCKER-USER'],
      ['-t', 'nat', '-S', `TP-NAT-${NET}`],
      ['-t', 'filter', '-S', 'TP-S-0123456789abcdef0123'],
      ['-t', 'filter', '-N', `TP-FWD-${NET}`],
      ['-t', 'nat', '-N', `TP-NAT-${NET}`],
      ['-t', 'filter', '-I', 'DOCKER-USER', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-t', 'filter', '-D', 'INPUT', ...HOOK, '-j', `TP-IN-${NET}`],
      ['-t', 'nat', '-I', 'PREROUTING', '1', ...HOOK, '-j', `TP-NAT-${NET}`],
    ]) {
      expect(containerCreateProblem(iptables(args), settings), args.join(' ')).toBeUndefined();
    }
  });

  it('refuses exec-capable options, other chains and tables, flushes, policies and redirections of host ports', () => {
    const hostile: string[][] = [
      ['--modprobe=/host/tmp/x', '-S'],
      ['-S', '--modprobe=/tmp/x'],
      ['-S', 'DOCKER-USER', '--modprobe', '/bin/sh'],
      ['-F', 'INPUT'],
      ['-F', 'OUTPUT'],
      ['-P', 'OUTPUT', 'DROP'],
      ['-t', 'nat', '-F', 'OUTPUT'],
      ['-F', 'DOCKER-USER'],
      ['-F'],
      ['-t', 'nat', '-F'],
      ['-X'],
      ['-P', 'INPUT', 'ACCEPT'],
      ['-P', 'FORWARD', 'ACCEPT'],
      ['-Z'],
      ['-t', 'raw', '-S'],
      ['-t', 'mangle', '-N', `TP-FWD-${NET}`],
      ['-t', 'security', '-S'],
      ['-N', 'MINE'],
      ['-N', `TP-NAT-${NET}`],
      ['-t', 'nat', '-N', `TP-FWD-${NET}`],
      ['-X', `TP-FWD-${NET}`],
      ['-A', 'INPUT', '-j', 'ACCEPT'],
      ['-I', 'INPUT', '1', '-j', 'ACCEPT'],
      ['-I', 'INPUT', '1', '-p', 'tcp', '--dport', '22', '-j', 'ACCEPT'],
      ['-t', 'nat', '-A', 'PREROUTING', '-p', 'tcp', '--dport', '22', '-j', 'DNAT', '--to-destination', '198.18.0.1:22'],
      ['-t', 'nat', '-I', 'PREROUTING', '1', '-p', 'tcp', '--dport', '22', '-j', 'REDIRECT', '--to-ports', '2222'],
      ['-t', 'nat', '-I', 'OUTPUT', '1', ...HOOK, '-j', `TP-NAT-${NET}`],
      ['-I', 'INPUT', '1', '-i', 'eth0', '-m', 'comment', '--comment', 'tidepool-isolation/tidepool', '-j', `TP-IN-${NET}`],
      ['-I', 'INPUT', '1', '-i', 'br-+', '-m', 'comment', '--comment', 'tidepool-isolation/tidepool', '-j', `TP-IN-${NET}`],
      ['-I', 'INPUT', '1', ...HOOK, '-j', 'ACCEPT'],
      ['-I', 'INPUT', '1', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-I', 'DOCKER-USER', '2', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-I', 'DOCKER-USER', '1', ...HOOK, '-j', `TP-FWD-${NET}`, '--modprobe=/x'],
      ['-I', 'DOCKER-USER', '1', '!', ...HOOK, '-j', `TP-FWD-${NET}`],
      ['-D', 'DOCKER-USER', '1'],
      ['-D', 'INPUT', '-j', 'REJECT'],
      ['-I', 'OUTPUT', '1', '-j', 'DROP'],
      ['-S', 'DOCKER-USER\n-F'],
      ['-S', "a'b"],
      [],
      ['-t'],
      ['-t', 'nat'],
    ];
    for (const args of hostile) expect(containerCreateProblem(iptables(args), settings), JSON.stringify(args)).toMatch(/firewall helper refused/);
  });

  it('refuses scripts that are not exactly single-quoted words', () => {
    for (const script of [
      "exec chroot /host iptables -w 'a'\\''b'",
      "exec chroot /host iptables -w '-S''DOCKER-USER'",
      "exec chroot /host iptables -w '-S'  'DOCKER-USER'",
      "exec chroot /host iptables -w '-S' 'DOCKER-USER' ",
      "exec chroot /host iptables -w '-S'\n'-F'",
      "exec chroot /host iptables -w '-S\n-F'",
      "exec chroot /host iptables -w -S",
      "exec chroot /host iptables -w '-S' \"$X\"",
      "exec chroot /host iptables -w '--modprobe=/tmp/x'",
      "exec chroot /host iptables -w '-S'\\'",
      "exec chroot /host ip6tables-legacy -w '-S'",
      "exec chroot /host ip6tables -w '-S' 'INPUT' ",
    ]) {
      expect(containerCreateProblem(helper(script), settings), script).toMatch(/firewall helper refused/);
    }
  });
});

describe('the firewall helper touches only the platform\'s own networks', () => {
  const OTHER = 'fedcba987654';

  it('lists a named chain, never a whole table (the host\'s rules)', () => {
    for (const args of [['-S'], ['-t', 'filter', '-S'], ['-t', 'nat', '-S'], ['-S', 'OUTPUT'], ['-t', 'nat', '-S', 'POSTROUTING'], ['-S', 'DOCKER']]) {
      expect(containerCreateProblem(iptables(args), settings), args.join(' ')).toMatch(/lists only a named chain of the platform/);
    }
  });

  it('hooks a network\'s chain only to that network\'s bridge', () => {
    const otherBridge = ['-i', `br-${OTHER}`, '-m', 'comment', '--comment', 'tidepool-isolation/tidepool'];
    for (const args of [
      ['-t', 'filter', '-I', 'DOCKER-USER', '1', ...otherBridge, '-j', `TP-FWD-${NET}`],
      ['-t', 'filter', '-I', 'INPUT', '1', ...otherBridge, '-j', `TP-IN-${NET}`],
      ['-t', 'nat', '-I', 'PREROUTING', '1', ...otherBridge, '-j', `TP-NAT-${NET}`],
      ['-t', 'filter', '-I', 'DOCKER-USER', '1', ...HOOK, '-j', 'TP-FWD-abc'],
    ]) {
      expect(containerCreateProblem(iptables(args), settings), args.join(' ')).toMatch(/firewall helper refused: iptables: /);
    }
    // Rules of a network's chains name only that network's bridge; a sandbox's chain names none.
    for (const rule of [`-A TP-FWD-${NET} -o br-${OTHER} -p tcp -j REJECT --reject-with tcp-reset`, `-A TP-S-0123456789abcdef0123 -i ${BR} -j RETURN`]) {
      expect(containerCreateProblem(restore(`*filter\n${rule}\nCOMMIT\n`), settings), rule).toMatch(/takes only the bridge of the network whose chain this is/);
    }
    expect(containerCreateProblem(restore(`*filter\n-A TP-FWD-${NET} -o ${BR} -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n`), settings)).toBeUndefined();
  });

  it('names the network a hook is inserted for, for the gate to look it up', () => {
    expect(insertedHookNetwork(iptables(['-t', 'filter', '-I', 'DOCKER-USER', '1', ...HOOK, '-j', `TP-FWD-${NET}`]))).toBe(NET);
    expect(insertedHookNetwork(iptables(['-t', 'nat', '-I', 'PREROUTING', '1', ...HOOK, '-j', `TP-NAT-${NET}`]))).toBe(NET);
    expect(insertedHookNetwork(helper(`exec chroot /host ip6tables -w ${['-t', 'filter', '-I', 'INPUT', '1', ...HOOK, '-j', `TP-IN-${NET}`].map(quote).join(' ')}`))).toBe(NET);
    // Deleting a stale hook (its network may be gone) and listing need no lookup.
    expect(insertedHookNetwork(iptables(['-t', 'filter', '-D', 'DOCKER-USER', ...HOOK, '-j', `TP-FWD-${NET}`]))).toBeUndefined();
    expect(insertedHookNetwork(iptables(['-S', 'DOCKER-USER']))).toBeUndefined();
    expect(insertedHookNetwork(restore('*filter\nCOMMIT\n'))).toBeUndefined();
  });
});

describe('the firewall helper restores only the platform chains', () => {
  const install = [
    '*filter',
    `:TP-FWD-${NET} - [0:0]`,
    `:TP-IN-${NET} - [0:0]`,
    `-A TP-FWD-${NET} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN`,
    `-A TP-FWD-${NET} -s 172.30.0.2/32 -m mac --mac-source 02:42:ac:1e:00:02 -j ACCEPT`,
    `-A TP-FWD-${NET} -o ${BR} -p tcp -j REJECT --reject-with tcp-reset`,
    `-A TP-FWD-${NET} -d 10.0.0.0/8 -j REJECT --reject-with icmp-port-unreachable`,
    `-A TP-IN-${NET} -p tcp -j REJECT --reject-with tcp-reset`,
    `-A TP-FWD-${NET} -j TP-SBX-${NET}`,
    'COMMIT',
    '',
  ].join('\n');

  it('accepts the shape the platform writes', () => {
    expect(containerCreateProblem(restore(install), settings)).toBeUndefined();
    const sandbox = [
      '*filter',
      ':TP-S-0123456789abcdef0123 - [0:0]',
      '-A TP-S-0123456789abcdef0123 -d 1.1.1.1/32 -j RETURN',
      `-D TP-SBX-${NET} -s 172.30.0.7/32 -m comment --comment "tidepool-sandbox/isbx1" -j TP-S-0123456789abcdef0000`,
      `-A TP-SBX-${NET} -s 172.30.0.7/32 -m comment --comment tidepool-sandbox/isbx1 -j TP-S-0123456789abcdef0123`,
      'COMMIT',
      '*nat',
      ':TP-R-0123456789abcdef0123 - [0:0]',
      '-A TP-R-0123456789abcdef0123 -p tcp --dport 443 -j REDIRECT --to-ports 40001',
      `-A TP-NAT-${NET} -s 172.30.0.7/32 -m comment --comment tidepool-sandbox/isbx1 -j TP-R-0123456789abcdef0123`,
      'COMMIT',
      '',
    ].join('\n');
    expect(containerCreateProblem(restore(sandbox), settings)).toBeUndefined();
  });

  it('refuses other tables, built-in chains, policies, DNAT, unknown options and COMMIT tricks', () => {
    const hostile = [
      '*filter\n-F INPUT\nCOMMIT\n',
      '*filter\n-F OUTPUT\nCOMMIT\n',
      '*filter\n:OUTPUT DROP [0:0]\nCOMMIT\n',
      '*filter\n-F DOCKER-USER\nCOMMIT\n',
      '*filter\n-F\nCOMMIT\n',
      '*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n',
      '*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n',
      '*filter\n-P INPUT ACCEPT\nCOMMIT\n',
      '*filter\n-A INPUT -j ACCEPT\nCOMMIT\n',
      `*filter\n-I INPUT 1 -i ${BR} -j TP-IN-${NET}\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j ACCEPT\nCOMMIT\n`,
      `*filter\n-A TP-IN-${NET} -s 198.18.0.1/32 -m mac --mac-source 02:42:ac:1e:00:02 -j ACCEPT\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j DROP --modprobe=/tmp/x\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m comment --comment x --modprobe /tmp/x -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j LOG\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d 999.0.0.0/8 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d 10.0.0.0/33 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d 10.0.0.0/8 -d 1.2.3.4 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -d example.com -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} ! -d 10.0.0.0/8 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m comment --comment "a b" -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m comment --comment "tidepool-sandbox/x"" -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m comment --comment 'tidepool-sandbox/x' -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -m owner --uid-owner 0 -j RETURN\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j TP-NAT-${NET}\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -p tcp -j REDIRECT --to-ports 22\nCOMMIT\n`,
      `*nat\n-A PREROUTING -p tcp --dport 22 -j DNAT --to-destination 198.18.0.1:22\nCOMMIT\n`,
      `*nat\n:TP-R-abc - [0:0]\n-A TP-R-abc -p tcp --dport 22 -j DNAT --to-destination 198.18.0.1\nCOMMIT\n`,
      `*nat\n-A TP-NAT-${NET} -p tcp -j MASQUERADE\nCOMMIT\n`,
      `*nat\n:TP-R-abc - [0:0]\n-A TP-R-abc -p tcp --dport 80 -j REDIRECT --to-ports 22\nCOMMIT\n`,
      `*nat\n:TP-R-abc - [0:0]\n-A TP-R-abc -p tcp --dport 80 -j REDIRECT --to-ports 40000-40010\nCOMMIT\n`,
      `*nat\n:TP-R-abc - [0:0]\n-A TP-R-abc -p udp --dport 53 -j REDIRECT --to-ports 40000\nCOMMIT\n`,
      '*nat\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n',
      '*raw\n-A PREROUTING -j NOTRACK\nCOMMIT\n',
      '*mangle\nCOMMIT\n',
      '*security\nCOMMIT\n',
      '*filter\nCOMMIT\n*filter\n-F INPUT\nCOMMIT\n',
      `*filter\n:TP-FWD-${NET} - [0:0]\n*nat\nCOMMIT\n`,
      `*filter\n:TP-FWD-${NET} - [0:0]\n`,
      `*filter\n:TP-FWD-${NET} - [0:0]\nCOMMIT`,
      'COMMIT\n',
      `-A TP-FWD-${NET} -j RETURN\n*filter\nCOMMIT\n`,
      '*filter\nCOMMIT\n-A INPUT -j ACCEPT\n',
      '*filter\nCOMMIT\n\n*filter\nCOMMIT\n',
      `*filter\n-A TP-FWD-${NET} -j RETURN\r\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET}\t-j RETURN\nCOMMIT\n`,
      `*filter\n# -A INPUT -j ACCEPT\nCOMMIT\n`,
      `*filter\n:TP-FWD-${NET} ACCEPT [0:0]\nCOMMIT\n`,
      `*filter\n:TP-FWD-${NET} - [5:7]\nCOMMIT\n`,
      `*filter\n-N TP-FWD-${NET}\nCOMMIT\n`,
      `*filter\n-X INPUT\nCOMMIT\n`,
      `*filter\n-A TP-FWD-${NET} -j RETURN\nCOMMIT\nCOMMIT\n`,
      '',
      '*filter',
    ];
    for (const rules of hostile) expect(containerCreateProblem(restore(rules), settings), JSON.stringify(rules)).toMatch(/firewall helper refused/);
  });
});

describe('restore lines iptables-restore reads as the gate does', () => {
  const rule = `-A TP-FWD-${NET} -d 10.0.0.0/8 -j RETURN`;

  it('refuses a line padded past the restore buffer, whose tail would run as a command of its own', () => {
    // A rule the grammar allows as one line (the platform container's ACCEPT with a comment tag). iptables-restore
    // reads at most 10,239 bytes of a line and the rest as the next one: padded so that the cut falls inside the
    // tag, it reads `... --comment tidepool-sandbox/a` and then `-IINPUT -j ACCEPT` (getopt: -I INPUT).
    const head = `-A TP-FWD-${NET} -s 172.30.0.2/32 -m mac --mac-source 02:42:ac:1e:00:02 -m comment --comment`;
    const padded = `${head}${' '.repeat(10_239 - head.length - 'tidepool-sandbox/a'.length)}tidepool-sandbox/a-IINPUT -j ACCEPT`;
    expect(padded.indexOf('-IINPUT')).toBe(10_239);
    expect(containerCreateProblem(restore(`*filter\n${padded}\nCOMMIT\n`), settings)).toMatch(/firewall helper refused: iptables-restore: line 2/);
    const long = `-A TP-FWD-${NET} -m comment --comment tidepool-sandbox/${'x'.repeat(MAX_RESTORE_LINE)} -j RETURN`;
    expect(containerCreateProblem(restore(`*filter\n${long}\nCOMMIT\n`), settings)).toMatch(/longer than 4096 bytes/);
  });

  it('takes exactly one space between words', () => {
    expect(containerCreateProblem(restore(`*filter\n${rule}\nCOMMIT\n`), settings)).toBeUndefined();
    for (const line of [rule.replace(' -d', '  -d'), rule.replace(' -j', '\t-j'), `${rule} `, `${rule}  `, rule.replace('RETURN', ' RETURN')]) {
      expect(containerCreateProblem(restore(`*filter\n${line}\nCOMMIT\n`), settings), JSON.stringify(line)).toMatch(/firewall helper refused/);
    }
    for (const header of ['*filter ', `:TP-FWD-${NET}  - [0:0]`, 'COMMIT ']) {
      expect(containerCreateProblem(restore(`*filter\n${header}\nCOMMIT\n`), settings), JSON.stringify(header)).toMatch(/firewall helper refused/);
    }
  });
});
