import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { FirewallCommands } from './firewall-commands.ts';
import { SandboxFirewall, sandboxChain, splitRule } from './sandbox-firewall.ts';

/** Records what would run; `-S` listings come from `listings` (by table and chain). */
class RecordingCommands implements FirewallCommands {
  readonly where = 'host';
  readonly calls: string[][] = [];
  readonly restores: string[] = [];
  listings: Record<string, string> = {};
  async iptables(args: string[]): Promise<string> {
    this.calls.push(args);
    const table = args[0] === '-t' ? args[1]! : 'filter';
    const rest = args[0] === '-t' ? args.slice(2) : args;
    if (rest[0] === '-S') return this.listings[`${table}:${rest[1] ?? ''}`] ?? '';
    return '';
  }
  async restore(rules: string): Promise<void> {
    this.restores.push(rules);
  }
  async hostFile(): Promise<string> {
    return '';
  }
}

const NET = { name: 'sbx', id: 'abcdef0123456789', bridge: 'br-abcdef012345' };

function firewall(commands: RecordingCommands, peer = false) {
  return new SandboxFirewall({ commands, network: NET, logger: pino({ level: 'silent' }), resolvers: ['10.9.9.9'], ...(peer ? { peer: { address: '172.30.0.2', mac: '02:42:ac:1e:00:02' } } : {}) });
}

describe('SandboxFirewall rules', () => {
  it('replaces the network chains in one transaction, in the order that matters', async () => {
    const commands = new RecordingCommands();
    await firewall(commands, true).install();
    const rules = commands.restores[0]!.split('\n');
    expect(rules[0]).toBe('*filter');
    expect(rules).toContain(':TP-FWD-abcdef012345 - [0:0]');
    const forward = rules.filter((r) => r.startsWith('-A TP-FWD-'));
    expect(forward[0]).toContain('--ctstate RELATED,ESTABLISHED -j RETURN');
    expect(forward[1]).toBe('-A TP-FWD-abcdef012345 -s 172.30.0.2/32 -m mac --mac-source 02:42:ac:1e:00:02 -j ACCEPT');
    expect(forward[2]).toContain(`-o ${NET.bridge} -p tcp -j REJECT --reject-with tcp-reset`);
    const dns = forward.findIndex((r) => r.includes('-d 10.9.9.9/32 -p udp --dport 53 -j RETURN'));
    const privateRange = forward.findIndex((r) => r.includes('-d 10.0.0.0/8'));
    expect(dns).toBeGreaterThan(2);
    expect(privateRange).toBeGreaterThan(dns);
    expect(forward.at(-1)).toBe('-A TP-FWD-abcdef012345 -j TP-SBX-abcdef012345');
    const input = rules.filter((r) => r.startsWith('-A TP-IN-'));
    expect(input.at(-1)).toContain('REJECT');
    // Hooked first into DOCKER-USER, INPUT and nat PREROUTING under the tag.
    const inserts = commands.calls.filter((c) => c.includes('-I')).map((c) => c.join(' '));
    expect(inserts).toEqual([
      `-t filter -I DOCKER-USER 1 -i ${NET.bridge} -m comment --comment tidepool-isolation/sbx -j TP-FWD-abcdef012345`,
      `-t filter -I INPUT 1 -i ${NET.bridge} -m comment --comment tidepool-isolation/sbx -j TP-IN-abcdef012345`,
      `-t nat -I PREROUTING 1 -i ${NET.bridge} -m comment --comment tidepool-isolation/sbx -j TP-NAT-abcdef012345`,
    ]);
  });

  it('keeps one hook: an identical one stays, a stale one (older bridge) goes', async () => {
    const commands = new RecordingCommands();
    commands.listings['filter:DOCKER-USER'] = [
      '-N DOCKER-USER',
      `-A DOCKER-USER -i ${NET.bridge} -m comment --comment "tidepool-isolation/sbx" -j TP-FWD-abcdef012345`,
      '-A DOCKER-USER -i br-old -m comment --comment "tidepool-isolation/sbx" -j TP-FWD-old',
      '-A DOCKER-USER -i br-other -m comment --comment "tidepool-isolation/sbx-2" -j TP-FWD-other',
      '-A DOCKER-USER -j RETURN',
    ].join('\n');
    await firewall(commands).install();
    const userChain = commands.calls.filter((c) => c.includes('DOCKER-USER') && (c.includes('-D') || c.includes('-I'))).map((c) => c.join(' '));
    expect(userChain).toEqual(['-t filter -D DOCKER-USER -i br-old -m comment --comment tidepool-isolation/sbx -j TP-FWD-old']);
  });

  it('writes a sandbox chain (allowed before denied), moves its dispatch, and redirects 80/443 only with domains', async () => {
    const commands = new RecordingCommands();
    commands.listings['filter:TP-SBX-abcdef012345'] = [
      '-A TP-SBX-abcdef012345 -s 172.30.0.7/32 -m comment --comment "tidepool-sandbox/isbx1" -j TP-S-old',
      '-A TP-SBX-abcdef012345 -s 172.30.0.9/32 -m comment --comment "tidepool-sandbox/igone" -j TP-S-gone',
      '-A TP-SBX-abcdef012345 -s 172.30.0.8/32 -m comment --comment "tidepool-sandbox/iother" -j TP-S-other',
    ].join('\n');
    const fw = firewall(commands);
    fw.setRedirect({ http: 41000, tls: 41001 });
    await fw.applySandbox('isbx1', '172.30.0.9', { allow: ['198.18.1.2/32'], deny: ['0.0.0.0/0'], domains: ['example.com'] });
    const text = commands.restores[0]!;
    const chain = sandboxChain('isbx1');
    expect(text).toContain(`:${chain} - [0:0]\n-A ${chain} -d 198.18.1.2/32 -j RETURN\n-A ${chain} -d 0.0.0.0/0 -p tcp -j REJECT`);
    // Its old dispatch (other address) and whatever held its new address go; the other sandbox's stays.
    expect(text).toContain('-D TP-SBX-abcdef012345 -s 172.30.0.7/32');
    expect(text).toContain('-D TP-SBX-abcdef012345 -s 172.30.0.9/32');
    expect(text).not.toContain('-D TP-SBX-abcdef012345 -s 172.30.0.8/32');
    expect(text).toContain(`-A TP-SBX-abcdef012345 -s 172.30.0.9/32 -m comment --comment tidepool-sandbox/isbx1 -j ${chain}`);
    const nat = sandboxChain('isbx1', 'TP-R-');
    expect(text).toContain(`*nat\n:${nat} - [0:0]\n-A ${nat} -d 198.18.1.2/32 -j RETURN\n-A ${nat} -p tcp --dport 80 -j REDIRECT --to-ports 41000\n-A ${nat} -p tcp --dport 443 -j REDIRECT --to-ports 41001`);

    await fw.applySandbox('isbx2', '172.30.0.10', { allow: [], deny: [] });
    expect(commands.restores[1]).not.toContain('REDIRECT');
  });

  it('sends HTTP/TLS to allowed CIDRs of a sandbox with transforms to the proxy\'s allowed ports (other ports still direct)', async () => {
    const commands = new RecordingCommands();
    const fw = firewall(commands);
    const transforms = { 'api.example.com': [{ transform: { headers: { A: 'b' } } }] };
    fw.setRedirect({ http: 41000, tls: 41001, allowedHttp: 41003, allowedTls: 41004 });
    await fw.applySandbox('isbx5', '172.30.0.12', { allow: ['198.18.1.0/24'], deny: ['0.0.0.0/0'], transforms });
    const nat = sandboxChain('isbx5', 'TP-R-');
    expect(commands.restores[0]).toContain([
      `*nat\n:${nat} - [0:0]`,
      `-A ${nat} -d 198.18.1.0/24 -p tcp --dport 80 -j REDIRECT --to-ports 41003`,
      `-A ${nat} -d 198.18.1.0/24 -p tcp --dport 443 -j REDIRECT --to-ports 41004`,
      `-A ${nat} -d 198.18.1.0/24 -j RETURN`,
      `-A ${nat} -p tcp --dport 80 -j REDIRECT --to-ports 41000`,
      `-A ${nat} -p tcp --dport 443 -j REDIRECT --to-ports 41001`,
    ].join('\n'));
    // Without transforms (domains only), allowed CIDRs go direct as before.
    await fw.applySandbox('isbx6', '172.30.0.13', { allow: ['198.18.1.0/24'], deny: ['0.0.0.0/0'], domains: ['example.com'] });
    expect(commands.restores[1]).not.toContain('--to-ports 4100' + '3');
    expect(commands.restores[1]).toContain(`-A ${sandboxChain('isbx6', 'TP-R-')} -d 198.18.1.0/24 -j RETURN`);
  });

  it('sends all TCP of a sandbox with its own egress proxy to the tunnel (DNS to the resolvers excepted), and refuses without a tunnel', async () => {
    const commands = new RecordingCommands();
    const fw = firewall(commands);
    const upstream = { protocol: 'socks5' as const, host: '198.18.60.3', port: 1080, username: 'u', password: 'pw-secret' };
    fw.setRedirect({ http: 41000, tls: 41001 });
    await expect(fw.applySandbox('isbx3', '172.30.0.11', { allow: [], deny: [], upstream })).rejects.toThrow(/egress tunnel is not running/);
    expect(commands.restores).toHaveLength(0);
    fw.setRedirect({ http: 41000, tls: 41001, tunnel: 41002 });
    await fw.applySandbox('isbx3', '172.30.0.11', { allow: ['198.18.1.2/32'], deny: ['0.0.0.0/0'], domains: ['example.com'], upstream });
    const nat = sandboxChain('isbx3', 'TP-R-');
    const text = commands.restores[0]!;
    expect(text).toContain(`*nat\n:${nat} - [0:0]\n-A ${nat} -d 10.9.9.9/32 -p tcp --dport 53 -j RETURN\n-A ${nat} -p tcp -j REDIRECT --to-ports 41002\n`);
    // Allowed CIDRs are not let past the tunnel, and the domain redirects are not written.
    expect(text).not.toContain(`-A ${nat} -d 198.18.1.2/32 -j RETURN`);
    expect(text).not.toContain('--to-ports 41000');
    // Nothing of the proxy (address, credentials) goes into the rules: the tunnel holds it.
    expect(text).not.toContain('198.18.60.3');
    expect(text).not.toContain('pw-secret');
  });

  it('splits iptables -S lines with quoted comments', () => {
    expect(splitRule('-A X -m comment --comment "a b" -j Y')).toEqual(['-A', 'X', '-m', 'comment', '--comment', 'a b', '-j', 'Y']);
  });
});
