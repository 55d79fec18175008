import net from 'node:net';
import type { EgressPolicy } from '../sandbox-runtime.ts';

/**
 * A sandbox's CIDR rules as the egress proxy applies them to the addresses it dials for it when the sandbox
 * has no domain allowlist (its TCP 80/443 passes the proxy only because of network.rules transforms): an
 * allowed CIDR wins, a denied one refuses, anything else is allowed (as the firewall would have decided).
 */
export class CidrPolicy {
  private readonly allow = new net.BlockList();
  private readonly deny = new net.BlockList();

  constructor(policy: Pick<EgressPolicy, 'allow' | 'deny'>) {
    for (const [list, cidrs] of [[this.allow, policy.allow], [this.deny, policy.deny]] as const) {
      for (const cidr of cidrs) {
        const [address, bits] = cidr.split('/');
        if (net.isIPv4(address!)) list.addSubnet(address!, Number(bits ?? 32), 'ipv4');
      }
    }
  }

  /** In an allowed CIDR (where the firewall lets a connection pass whatever else the sandbox allows). */
  allowsExplicitly(address: string): boolean {
    return net.isIPv4(address) && this.allow.check(address, 'ipv4');
  }

  allows(address: string): boolean {
    if (!net.isIPv4(address)) return false;
    return this.allow.check(address, 'ipv4') || !this.deny.check(address, 'ipv4');
  }
}
