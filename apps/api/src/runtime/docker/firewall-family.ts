import { isIP } from 'node:net';
import type { EgressPolicy } from '../sandbox-runtime.ts';

/** The address family one SandboxFirewall writes rules for (iptables or ip6tables). */
export type IpFamily = 'ipv4' | 'ipv6';

/**
 * Never reachable from a sandbox over IPv4, whatever its rules say (the reference platform's always-deny set):
 * private and shared ranges, loopback, link-local (cloud metadata included).
 */
export const ALWAYS_DENIED_V4 = ['10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.168.0.0/16'];

/**
 * The IPv6 counterpart: loopback, IPv4-mapped, unique-local (fc00::/7: the sandbox network's own prefix and any
 * private IPv6 network), link-local, the old site-local range, local-use NAT64, and the well-known NAT64 prefix
 * where it embeds an IPv4 range denied above (a NAT64 gateway would otherwise reach 10/8 or 169.254/16).
 */
export const ALWAYS_DENIED_V6 = [
  '::1/128',
  '::ffff:0:0/96',
  '64:ff9b::a00:0/104',
  '64:ff9b::6440:0/106',
  '64:ff9b::7f00:0/104',
  '64:ff9b::a9fe:0/112',
  '64:ff9b::ac10:0/108',
  '64:ff9b::c0a8:0/112',
  '64:ff9b:1::/48',
  'fc00::/7',
  'fe80::/10',
  'fec0::/10',
];

/** What differs between the iptables and ip6tables rules of one network. */
export interface FamilyRules {
  family: IpFamily;
  /** Prefix length of one host's address (`-s <address>/<bits>` in the dispatch chain). */
  hostBits: 32 | 128;
  alwaysDenied: readonly string[];
  /** `--reject-with` for what is not TCP. */
  rejectUnreachable: string;
  /**
   * Rules that pass before anything is refused: IPv6 neighbour discovery (solicitation, advertisement), which
   * conntrack does not track, so that a refused connection is reset at once instead of timing out on an
   * unresolved neighbour, and the sandbox can resolve its gateway at all. (ARP, its IPv4 counterpart, is not IP.)
   */
  neighbourDiscovery: readonly string[];
  /** Whether allowed domains are redirected to the egress proxy in this family (the nat table is used). */
  redirects: boolean;
}

export const FAMILY_RULES: Record<IpFamily, FamilyRules> = {
  ipv4: { family: 'ipv4', hostBits: 32, alwaysDenied: ALWAYS_DENIED_V4, rejectUnreachable: 'icmp-port-unreachable', neighbourDiscovery: [], redirects: true },
  ipv6: {
    family: 'ipv6',
    hostBits: 128,
    alwaysDenied: ALWAYS_DENIED_V6,
    rejectUnreachable: 'icmp6-port-unreachable',
    neighbourDiscovery: ['-p ipv6-icmp -m icmp6 --icmpv6-type 135 -j RETURN', '-p ipv6-icmp -m icmp6 --icmpv6-type 136 -j RETURN'],
    // The egress proxy listens on the IPv4 gateway: over IPv6, a sandbox with allowed domains is refused on 80/443
    // like anywhere else (its domain list needs ALL_TRAFFIC denied), and clients fall back to IPv4.
    redirects: false,
  },
};

/** Whether `cidr` (an address or address/bits) is of `family`. */
export function isOfFamily(family: IpFamily, cidr: string): boolean {
  return isIP(cidr.split('/')[0]!) === (family === 'ipv4' ? 4 : 6);
}

const ALL_IPV4 = '0.0.0.0/0';
const ALL_IPV6 = '::/0';

/**
 * The part of a sandbox's egress policy one family enforces. `0.0.0.0/0` in the denied list is the SDK's
 * ALL_TRAFFIC (what `allowInternetAccess: false` sends): it denies IPv6 too, as `::/0`.
 */
export function familyPolicy(family: IpFamily, policy: EgressPolicy): EgressPolicy {
  // IPv6 cannot go through a sandbox's own egress proxy (only IPv4 TCP is tunnelled): none of it leaves.
  if (family === 'ipv6' && policy.upstream) return { ...policy, allow: [], deny: [ALL_IPV6] };
  const own = (list: string[]): string[] => list.filter((cidr) => isOfFamily(family, cidr));
  const deny = own(policy.deny);
  if (family === 'ipv6' && policy.deny.includes(ALL_IPV4) && !deny.includes(ALL_IPV6)) deny.push(ALL_IPV6);
  return { ...policy, allow: own(policy.allow), deny };
}
