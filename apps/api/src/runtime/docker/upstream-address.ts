import net from 'node:net';
import { deniedDestination, egressNameResolver } from './egress-proxy.ts';
import { UpstreamDialError } from './egress-upstream.ts';

/**
 * Where the platform may dial a user's egress proxy. The platform dials it from the Docker host, so an address in
 * the always-denied ranges (loopback, private, link-local, "this host") would let a sandbox owner reach the host's
 * own services or its private network; such an address is refused unless the operator lists it in
 * TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS. The sandbox's own allowOut/denyOut govern its destinations, not this hop.
 */
export class UpstreamAddressPolicy {
  private readonly allowed = new net.BlockList();

  constructor(allowedCidrs: string[] = []) {
    for (const cidr of allowedCidrs) {
      const [address, bits] = cidr.split('/');
      const family = net.isIPv6(address!) ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.allowed.addAddress(address!, family);
      else this.allowed.addSubnet(address!, Number(bits), family);
    }
  }

  permits(address: string): boolean {
    const family = net.isIPv6(address) ? 'ipv6' : net.isIPv4(address) ? 'ipv4' : undefined;
    if (!family) return false;
    return !deniedDestination(address) || this.allowed.check(address, family);
  }

  /**
   * The address to dial for `host` (an IP literal, or a name resolved now and pinned for this one connection):
   * rejects when it does not resolve or when any address it resolves to is not permitted.
   */
  async resolve(host: string): Promise<string> {
    let addresses: string[];
    if (net.isIP(host)) addresses = [host];
    else {
      try {
        addresses = await egressNameResolver.resolve(host);
      } catch (error) {
        throw new UpstreamDialError(`the egress proxy host ${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? 'lookup failed'})`);
      }
    }
    if (addresses.length === 0) throw new UpstreamDialError(`the egress proxy host ${host} does not resolve`);
    const refused = addresses.find((a) => !this.permits(a));
    if (refused) throw new UpstreamDialError(`the egress proxy address ${refused} is in a private, loopback or link-local range (an operator may allow it with TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS)`);
    return addresses[0]!;
  }
}
