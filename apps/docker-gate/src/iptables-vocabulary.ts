import { isIPv4, isIPv6 } from 'node:net';

/**
 * The iptables vocabulary of the platform's sandbox firewall (apps/api/src/runtime/docker/sandbox-firewall.ts),
 * as a whitelist grammar: its own chains (by prefix) in the two tables it uses, the built-in chains it hooks
 * them into (and only with its tagged jump from a Docker bridge), and the few match options and targets its
 * rules are made of. Everything else (other tables or chains, policies, flushes of built-in chains, DNAT,
 * `--modprobe` or any option not listed, negations) is outside the grammar.
 *
 * ip6tables (the rules of a sandbox network with IPv6) has a smaller grammar: the filter table only (no
 * redirection to the egress proxy), IPv6 addresses, FORWARD as a hook where Docker made no DOCKER-USER for IPv6,
 * ICMPv6 neighbour discovery as the one ICMP match, and no ACCEPT (no platform container over IPv6).
 */
export type Table = 'filter' | 'nat';

/** iptables (ipv4) or ip6tables (ipv6): which program the helper runs. */
export type Family = 'ipv4' | 'ipv6';

const TABLES: Record<Family, readonly Table[]> = { ipv4: ['filter', 'nat'], ipv6: ['filter'] };

export function isTable(name: string | undefined, family: Family = 'ipv4'): name is Table {
  return (TABLES[family] as readonly (string | undefined)[]).includes(name);
}

export function tablesOf(family: Family): string {
  return TABLES[family].join(', ');
}

/** The platform's chains per table: TP-FWD/TP-IN/TP-SBX-<network>, TP-S-<sandbox>; TP-NAT-<network>, TP-R-<sandbox>. */
const OWN_CHAIN_PREFIXES: Record<Table, readonly string[]> = {
  filter: ['TP-FWD-', 'TP-IN-', 'TP-SBX-', 'TP-S-'],
  nat: ['TP-NAT-', 'TP-R-'],
};
const CHAIN_SUFFIX = /^[A-Za-z0-9]{1,20}$/;

/** Built-in chains the platform hooks into, and the prefix of the only chain each may jump to. */
const HOOKS: Record<Family, Record<Table, Readonly<Record<string, string>>>> = {
  ipv4: { filter: { 'DOCKER-USER': 'TP-FWD-', INPUT: 'TP-IN-' }, nat: { PREROUTING: 'TP-NAT-' } },
  ipv6: { filter: { 'DOCKER-USER': 'TP-FWD-', FORWARD: 'TP-FWD-', INPUT: 'TP-IN-' }, nat: {} },
};

/** The prefix of `chain` when it is one of the platform's chains in `table`. */
export function ownChainPrefix(table: Table, chain: string | undefined): string | undefined {
  if (chain === undefined) return undefined;
  return OWN_CHAIN_PREFIXES[table].find((prefix) => chain.startsWith(prefix) && CHAIN_SUFFIX.test(chain.slice(prefix.length)));
}

export function isHookChain(table: Table, chain: string | undefined, family: Family = 'ipv4'): chain is string {
  return chain !== undefined && Object.hasOwn(HOOKS[family][table], chain);
}

export function hookChainsOf(table: Table, family: Family): string {
  return Object.keys(HOOKS[family][table]).join(' or ');
}

/**
 * The bridge interface Docker makes for a network is `br-` and the first 12 hex digits of its id, which is also
 * the suffix of the platform's chains for that network (TP-FWD-<id12> …). A rule names a bridge only in a chain
 * of that same network, and the hook of a network's chain matches only that network's bridge: never a host
 * interface, nor another network's bridge (whose traffic would go through the platform's chains).
 */
const NETWORK_CHAIN_PREFIXES = ['TP-FWD-', 'TP-IN-', 'TP-SBX-', 'TP-NAT-'];
const NETWORK_ID12 = /^[0-9a-f]{12}$/;

/** The 12 hex digits of the network whose chain `chain` is (TP-FWD-<id12> …), or undefined for any other chain. */
export function networkOfChain(chain: string | undefined): string | undefined {
  const prefix = NETWORK_CHAIN_PREFIXES.find((p) => chain?.startsWith(p));
  const suffix = prefix === undefined ? undefined : chain!.slice(prefix.length);
  return suffix !== undefined && NETWORK_ID12.test(suffix) ? suffix : undefined;
}

/** The bridge of the network whose chain `chain` is, or undefined when `chain` belongs to no network. */
function bridgeOfChain(chain: string | undefined): string | undefined {
  const network = networkOfChain(chain);
  return network === undefined ? undefined : `br-${network}`;
}
const COMMENT_TAG = /^tidepool-(?:isolation|sandbox)\/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const MAC = /^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}$/;
const CONNTRACK_STATES = new Set(['RELATED', 'ESTABLISHED', 'DNAT']);
const REJECT_WITH: Record<Family, ReadonlySet<string>> = { ipv4: new Set(['tcp-reset', 'icmp-port-unreachable']), ipv6: new Set(['tcp-reset', 'icmp6-port-unreachable']) };
/** Neighbour solicitation and advertisement: the only ICMPv6 the platform's rules name. */
const ICMPV6_TYPES = new Set(['135', '136']);
const PROTOCOLS: Record<Family, ReadonlySet<string>> = { ipv4: new Set(['tcp', 'udp']), ipv6: new Set(['tcp', 'udp', 'ipv6-icmp']) };

/** An IPv4 address, or an IPv4 network with a prefix length 0–32. */
export function isIpv4Cidr(value: string | undefined): boolean {
  if (value === undefined) return false;
  const [address, bits, extra] = value.split('/');
  if (extra !== undefined || !isIPv4(address!)) return false;
  return bits === undefined || (/^(?:0|[1-9]\d?)$/.test(bits) && Number(bits) <= 32);
}

/** An IPv6 address, or an IPv6 network with a prefix length 0–128 (no zone index). */
export function isIpv6Cidr(value: string | undefined): boolean {
  if (value === undefined) return false;
  const [address, bits, extra] = value.split('/');
  if (extra !== undefined || !isIPv6(address!) || address!.includes('%')) return false;
  return bits === undefined || (/^(?:0|[1-9]\d{0,2})$/.test(bits) && Number(bits) <= 128);
}

function isPort(value: string | undefined): boolean {
  return value !== undefined && /^[1-9]\d{0,4}$/.test(value) && Number(value) <= 65535;
}

/**
 * Why the rule `tokens` (what follows `-A <chain>` or `-D <chain>`) is not one the platform writes into its
 * own `chain` of `table`; undefined when it is. Options come at most once each, the target (`-j`) last.
 */
export function ruleProblem(table: Table, chain: string, tokens: readonly string[], family: Family = 'ipv4'): string | undefined {
  const seen = new Set<string>();
  let protocol: string | undefined;
  let i = 0;
  while (i < tokens.length) {
    const option = tokens[i]!;
    const value = tokens[i + 1];
    const key = option === '-m' ? `-m ${value}` : option;
    if (seen.has(key)) return `${key} given twice`;
    seen.add(key);
    switch (option) {
      case '-s':
      case '-d':
        if (family === 'ipv4' ? !isIpv4Cidr(value) : !isIpv6Cidr(value)) return `${option} needs an ${family === 'ipv4' ? 'IPv4' : 'IPv6'} address or network (got ${JSON.stringify(value)})`;
        i += 2;
        break;
      case '-p':
        if (!PROTOCOLS[family].has(value ?? '')) return `-p is ${[...PROTOCOLS[family]].join(' or ')} (got ${JSON.stringify(value)})`;
        protocol = value;
        i += 2;
        break;
      case '--dport':
        if (protocol !== 'tcp' && protocol !== 'udp') return '--dport needs -p tcp or -p udp before it';
        if (!isPort(value)) return `--dport needs a port (got ${JSON.stringify(value)})`;
        i += 2;
        break;
      case '-i':
      case '-o': {
        const bridge = bridgeOfChain(chain);
        if (bridge === undefined || value !== bridge) return `${option} takes only the bridge of the network whose chain this is (${bridge ?? 'none in this chain'}), got ${JSON.stringify(value)}`;
        i += 2;
        break;
      }
      case '-m': {
        const problem = matchProblem(value, tokens[i + 2], tokens[i + 3], family, protocol);
        if (problem) return problem;
        i += 4;
        break;
      }
      case '-j':
        return targetProblem(table, chain, value, tokens.slice(i + 2), protocol, seen, family);
      default:
        return `option ${JSON.stringify(option)} is not one the platform uses`;
    }
  }
  return 'a rule ends with its target (-j)';
}

function matchProblem(module: string | undefined, option: string | undefined, value: string | undefined, family: Family, protocol: string | undefined): string | undefined {
  if (module === 'conntrack' && option === '--ctstate') {
    const states = (value ?? '').split(',');
    return states.every((s) => CONNTRACK_STATES.has(s)) ? undefined : `--ctstate ${JSON.stringify(value)} is not allowed`;
  }
  if (module === 'icmp6' && option === '--icmpv6-type' && family === 'ipv6') {
    if (protocol !== 'ipv6-icmp') return '-m icmp6 needs -p ipv6-icmp before it';
    return ICMPV6_TYPES.has(value ?? '') ? undefined : `--icmpv6-type is 135 or 136, neighbour discovery (got ${JSON.stringify(value)})`;
  }
  if (module === 'mac' && option === '--mac-source' && family === 'ipv4') return MAC.test(value ?? '') ? undefined : `--mac-source needs a MAC address (got ${JSON.stringify(value)})`;
  if (module === 'comment' && option === '--comment') return COMMENT_TAG.test(value ?? '') ? undefined : `--comment takes only the platform's tags (got ${JSON.stringify(value)})`;
  return `match -m ${JSON.stringify(module)} ${JSON.stringify(option)} is not one the platform uses`;
}

function targetProblem(table: Table, chain: string, target: string | undefined, rest: readonly string[], protocol: string | undefined, seen: Set<string>, family: Family): string | undefined {
  const none = (): string | undefined => (rest.length === 0 ? undefined : `target ${target} takes no options here (got ${JSON.stringify(rest.join(' '))})`);
  switch (target) {
    case 'RETURN':
      return none();
    case 'ACCEPT':
      // Only the platform's own container (address and MAC) is let through, and only on the forward path.
      if (family !== 'ipv4' || table !== 'filter' || !chain.startsWith('TP-FWD-') || !seen.has('-s') || !seen.has('-m mac')) {
        return 'ACCEPT only for the platform container (-s <address> -m mac --mac-source <mac>) in a TP-FWD chain';
      }
      return none();
    case 'REJECT':
      if (table !== 'filter') return 'REJECT belongs to the filter table';
      if (rest.length === 0) return undefined;
      if (rest.length !== 2 || rest[0] !== '--reject-with' || !REJECT_WITH[family].has(rest[1]!)) return `REJECT takes only --reject-with ${[...REJECT_WITH[family]].join('|')} (got ${JSON.stringify(rest.join(' '))})`;
      return rest[1] === 'tcp-reset' && protocol !== 'tcp' ? '--reject-with tcp-reset needs -p tcp' : undefined;
    case 'REDIRECT':
      if (table !== 'nat' || !chain.startsWith('TP-R-')) return 'REDIRECT only in a TP-R chain of the nat table';
      if (protocol !== 'tcp') return 'REDIRECT needs -p tcp';
      // The egress proxy listens on ports the system picks (never below 1024): a host service such as sshd is no target.
      return rest.length === 2 && rest[0] === '--to-ports' && isPort(rest[1]) && Number(rest[1]) >= 1024
        ? undefined
        : `REDIRECT takes only --to-ports <port 1024-65535> (got ${JSON.stringify(rest.join(' '))})`;
    default:
      if (ownChainPrefix(table, target) === undefined) return `target ${JSON.stringify(target)} is not one the platform uses in the ${table} table`;
      return none();
  }
}

/**
 * The jump the platform puts into a built-in chain: exactly
 * `-i br-<id12> -m comment --comment tidepool-isolation/<network> -j <its chain for that built-in><id12>`, the
 * bridge and the chain of one network.
 */
export function hookRuleProblem(table: Table, builtin: string, tokens: readonly string[], family: Family = 'ipv4'): string | undefined {
  const [i, bridge, m, comment, commentOption, tag, j, target, ...extra] = tokens;
  const wanted = HOOKS[family][table][builtin]!;
  if (i !== '-i' || m !== '-m' || comment !== 'comment' || commentOption !== '--comment' || j !== '-j' || extra.length > 0) {
    return `a rule in ${builtin} is only the platform's jump: -i br-<id12> -m comment --comment tidepool-isolation/<network> -j ${wanted}<id12>`;
  }
  if (!COMMENT_TAG.test(tag ?? '') || !tag!.startsWith('tidepool-isolation/')) return `the jump in ${builtin} carries the tag tidepool-isolation/<network>`;
  if (ownChainPrefix(table, target) !== wanted || networkOfChain(target) === undefined) return `${builtin} jumps only to a ${wanted}<id12> chain (got ${JSON.stringify(target)})`;
  if (bridge !== bridgeOfChain(target)) return `the jump to ${target} matches only its network's bridge ${bridgeOfChain(target)} (got ${JSON.stringify(bridge)})`;
  return undefined;
}
