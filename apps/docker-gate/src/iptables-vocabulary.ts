import { isIPv4 } from 'node:net';

/**
 * The iptables vocabulary of the platform's sandbox firewall (apps/api/src/runtime/docker/sandbox-firewall.ts),
 * as a whitelist grammar: its own chains (by prefix) in the two tables it uses, the built-in chains it hooks
 * them into (and only with its tagged jump from a Docker bridge), and the few match options and targets its
 * rules are made of. Everything else (other tables or chains, policies, flushes of built-in chains, DNAT,
 * `--modprobe` or any option not listed, negations) is outside the grammar.
 */
export type Table = 'filter' | 'nat';

export function isTable(name: string | undefined): name is Table {
  return name === 'filter' || name === 'nat';
}

/** The platform's chains per table: TP-FWD/TP-IN/TP-SBX-<network>, TP-S-<sandbox>; TP-NAT-<network>, TP-R-<sandbox>. */
const OWN_CHAIN_PREFIXES: Record<Table, readonly string[]> = {
  filter: ['TP-FWD-', 'TP-IN-', 'TP-SBX-', 'TP-S-'],
  nat: ['TP-NAT-', 'TP-R-'],
};
const CHAIN_SUFFIX = /^[A-Za-z0-9]{1,20}$/;

/** Built-in chains the platform hooks into, and the prefix of the only chain each may jump to. */
const HOOKS: Record<Table, Readonly<Record<string, string>>> = {
  filter: { 'DOCKER-USER': 'TP-FWD-', INPUT: 'TP-IN-' },
  nat: { PREROUTING: 'TP-NAT-' },
};

/** The prefix of `chain` when it is one of the platform's chains in `table`. */
export function ownChainPrefix(table: Table, chain: string | undefined): string | undefined {
  if (chain === undefined) return undefined;
  return OWN_CHAIN_PREFIXES[table].find((prefix) => chain.startsWith(prefix) && CHAIN_SUFFIX.test(chain.slice(prefix.length)));
}

export function isHookChain(table: Table, chain: string | undefined): chain is string {
  return chain !== undefined && Object.hasOwn(HOOKS[table], chain);
}

/** A bridge interface Docker makes for a network (`br-` and 12 hex digits of its id): never a host interface. */
const BRIDGE = /^br-[0-9a-f]{12}$/;
const COMMENT_TAG = /^tidepool-(?:isolation|sandbox)\/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const MAC = /^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}$/;
const CONNTRACK_STATES = new Set(['RELATED', 'ESTABLISHED', 'DNAT']);
const REJECT_WITH = new Set(['tcp-reset', 'icmp-port-unreachable']);

/** An IPv4 address, or an IPv4 network with a prefix length 0–32. */
export function isIpv4Cidr(value: string | undefined): boolean {
  if (value === undefined) return false;
  const [address, bits, extra] = value.split('/');
  if (extra !== undefined || !isIPv4(address!)) return false;
  return bits === undefined || (/^(?:0|[1-9]\d?)$/.test(bits) && Number(bits) <= 32);
}

function isPort(value: string | undefined): boolean {
  return value !== undefined && /^[1-9]\d{0,4}$/.test(value) && Number(value) <= 65535;
}

/**
 * Why the rule `tokens` (what follows `-A <chain>` or `-D <chain>`) is not one the platform writes into its
 * own `chain` of `table`; undefined when it is. Options come at most once each, the target (`-j`) last.
 */
export function ruleProblem(table: Table, chain: string, tokens: readonly string[]): string | undefined {
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
        if (!isIpv4Cidr(value)) return `${option} needs an IPv4 address or network (got ${JSON.stringify(value)})`;
        i += 2;
        break;
      case '-p':
        if (value !== 'tcp' && value !== 'udp') return `-p is tcp or udp (got ${JSON.stringify(value)})`;
        protocol = value;
        i += 2;
        break;
      case '--dport':
        if (!protocol) return '--dport needs -p before it';
        if (!isPort(value)) return `--dport needs a port (got ${JSON.stringify(value)})`;
        i += 2;
        break;
      case '-i':
      case '-o':
        if (!BRIDGE.test(value ?? '')) return `${option} takes only a Docker bridge (br-<12 hex>), got ${JSON.stringify(value)}`;
        i += 2;
        break;
      case '-m': {
        const problem = matchProblem(value, tokens[i + 2], tokens[i + 3]);
        if (problem) return problem;
        i += 4;
        break;
      }
      case '-j':
        return targetProblem(table, chain, value, tokens.slice(i + 2), protocol, seen);
      default:
        return `option ${JSON.stringify(option)} is not one the platform uses`;
    }
  }
  return 'a rule ends with its target (-j)';
}

function matchProblem(module: string | undefined, option: string | undefined, value: string | undefined): string | undefined {
  if (module === 'conntrack' && option === '--ctstate') {
    const states = (value ?? '').split(',');
    return states.every((s) => CONNTRACK_STATES.has(s)) ? undefined : `--ctstate ${JSON.stringify(value)} is not allowed`;
  }
  if (module === 'mac' && option === '--mac-source') return MAC.test(value ?? '') ? undefined : `--mac-source needs a MAC address (got ${JSON.stringify(value)})`;
  if (module === 'comment' && option === '--comment') return COMMENT_TAG.test(value ?? '') ? undefined : `--comment takes only the platform's tags (got ${JSON.stringify(value)})`;
  return `match -m ${JSON.stringify(module)} ${JSON.stringify(option)} is not one the platform uses`;
}

function targetProblem(table: Table, chain: string, target: string | undefined, rest: readonly string[], protocol: string | undefined, seen: Set<string>): string | undefined {
  const none = (): string | undefined => (rest.length === 0 ? undefined : `target ${target} takes no options here (got ${JSON.stringify(rest.join(' '))})`);
  switch (target) {
    case 'RETURN':
      return none();
    case 'ACCEPT':
      // Only the platform's own container (address and MAC) is let through, and only on the forward path.
      if (table !== 'filter' || !chain.startsWith('TP-FWD-') || !seen.has('-s') || !seen.has('-m mac')) {
        return 'ACCEPT only for the platform container (-s <address> -m mac --mac-source <mac>) in a TP-FWD chain';
      }
      return none();
    case 'REJECT':
      if (table !== 'filter') return 'REJECT belongs to the filter table';
      if (rest.length === 0) return undefined;
      if (rest.length !== 2 || rest[0] !== '--reject-with' || !REJECT_WITH.has(rest[1]!)) return `REJECT takes only --reject-with tcp-reset|icmp-port-unreachable (got ${JSON.stringify(rest.join(' '))})`;
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
 * `-i <bridge> -m comment --comment tidepool-isolation/<network> -j <its chain for that built-in>`.
 */
export function hookRuleProblem(table: Table, builtin: string, tokens: readonly string[]): string | undefined {
  const [i, bridge, m, comment, commentOption, tag, j, target, ...extra] = tokens;
  const wanted = HOOKS[table][builtin]!;
  if (i !== '-i' || !BRIDGE.test(bridge ?? '') || m !== '-m' || comment !== 'comment' || commentOption !== '--comment' || j !== '-j' || extra.length > 0) {
    return `a rule in ${builtin} is only the platform's jump: -i br-<12 hex> -m comment --comment tidepool-isolation/<network> -j ${wanted}<network>`;
  }
  if (!COMMENT_TAG.test(tag ?? '') || !tag!.startsWith('tidepool-isolation/')) return `the jump in ${builtin} carries the tag tidepool-isolation/<network>`;
  if (ownChainPrefix(table, target) !== wanted) return `${builtin} jumps only to a ${wanted} chain (got ${JSON.stringify(target)})`;
  return undefined;
}
