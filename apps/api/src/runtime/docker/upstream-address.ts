import net from 'node:net';
import { ClusterAddresses, type ClusterHostSettings, clusterHostsOf } from './cluster-addresses.ts';
import { deniedDestination, egressNameResolver } from './egress-proxy.ts';
import { UpstreamDialError } from './egress-upstream.ts';

/** Proxy ports a sandbox's egress proxy may use unless TIDEPOOL_EGRESS_PROXY_PORTS says otherwise. */
export const DEFAULT_EGRESS_PROXY_PORTS = [80, 443, 1080, 3128, 8080, 8443];

export interface UpstreamPolicySettings {
  /** TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS: denied-range addresses the operator allows anyway. */
  allowedCidrs?: readonly string[];
  /** TIDEPOOL_EGRESS_PROXY_PORTS: the only ports a proxy may be on. */
  ports: readonly number[];
  /** The cluster's own addresses: refused whatever the ranges say. */
  cluster: Pick<ClusterAddresses, 'includes'>;
}

/**
 * Where the platform may dial a user's egress proxy. The platform dials it from the node, so an address in the
 * always-denied ranges (loopback, private, link-local, "this host") would let a sandbox owner reach the host's own
 * services or its private network; such an address is refused unless the operator lists it in
 * TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS. The cluster's own addresses (this machine's, the database's, the registry's,
 * the API's) are refused even then, and so is any port but the proxy ports of TIDEPOOL_EGRESS_PROXY_PORTS: the node
 * is no port scanner. The sandbox's own allowOut/denyOut govern its destinations, not this hop.
 */
export class UpstreamAddressPolicy {
  private readonly allowed = new net.BlockList();
  private readonly ports: ReadonlySet<number>;

  constructor(private readonly settings: UpstreamPolicySettings) {
    for (const cidr of settings.allowedCidrs ?? []) {
      const [address, bits] = cidr.split('/');
      const family = net.isIPv6(address!) ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.allowed.addAddress(address!, family);
      else this.allowed.addSubnet(address!, Number(bits), family);
    }
    this.ports = new Set(settings.ports);
  }

  permits(address: string): boolean {
    const family = net.isIPv6(address) ? 'ipv6' : net.isIPv4(address) ? 'ipv4' : undefined;
    if (!family) return false;
    return !deniedDestination(address) || this.allowed.check(address, family);
  }

  /** Throws UpstreamDialError unless `port` is one of the proxy ports. */
  checkPort(port: number): void {
    if (!this.ports.has(port)) {
      throw new UpstreamDialError(`port ${port} is not an egress proxy port (allowed: ${[...this.ports].join(', ')}; an operator may change them with TIDEPOOL_EGRESS_PROXY_PORTS)`);
    }
  }

  /**
   * The address to dial for `host:port` (an IP literal, or a name resolved now and pinned for this one connection):
   * rejects when the port is not a proxy port, when the name does not resolve, or when any address it resolves to
   * is not permitted or is one of the cluster's own.
   */
  async resolve(host: string, port: number): Promise<string> {
    this.checkPort(port);
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
    for (const address of addresses) {
      if (await this.settings.cluster.includes(address)) throw new UpstreamDialError(`the egress proxy address ${address} is one of the platform's own (a node, the API, the database or the registry)`);
    }
    return addresses[0]!;
  }
}

/** The policy's settings from the platform's (API or node agent) configuration. */
export function upstreamPolicySettingsOf(
  config: ClusterHostSettings & { egressProxyAllowedCidrs: string[]; egressProxyPorts: number[] },
): UpstreamPolicySettings {
  return { allowedCidrs: config.egressProxyAllowedCidrs, ports: config.egressProxyPorts, cluster: new ClusterAddresses(clusterHostsOf(config)) };
}
