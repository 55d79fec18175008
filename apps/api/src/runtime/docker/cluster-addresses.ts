import net from 'node:net';
import os from 'node:os';
import { egressNameResolver } from './egress-proxy.ts';

/** How long a cluster host's resolved addresses are reused before it is looked up again. */
const RESOLVED_FOR_MS = 60_000;

/** An address as compared here: IPv6 zone dropped, IPv4-mapped IPv6 as its IPv4, lower case. */
function canonical(address: string): string {
  const bare = address.replace(/%.*$/, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  return mapped ? mapped[1]! : bare;
}

function hostOf(url: string): string | undefined {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    return host === '' ? undefined : host;
  } catch {
    return undefined;
  }
}

/**
 * The names and addresses of the platform's own services from its settings: the database, the image registry,
 * the API's public name and sandbox domain, and a node agent's advertised URL. Never a destination of a dial made
 * on a user's behalf (a sandbox's egress proxy), whatever range they are in.
 */
/** The settings that name the platform's own services ('' where unset). */
export interface ClusterHostSettings {
  databaseUrl: string;
  registry: string;
  publicDomain: string;
  domain: string;
  nodeUrl: string;
}

export function clusterHostsOf(config: ClusterHostSettings): string[] {
  const hosts = [
    config.databaseUrl ? hostOf(config.databaseUrl) : undefined,
    config.registry ? hostOf(`https://${config.registry}`) : undefined,
    config.publicDomain ? hostOf(`https://${config.publicDomain}`) : undefined,
    hostOf(`https://${config.domain}`),
    config.nodeUrl ? hostOf(config.nodeUrl) : undefined,
  ];
  return [...new Set(hosts.filter((host): host is string => host !== undefined).map((host) => host.toLowerCase()))];
}

/**
 * What sandboxes may never reach besides the private ranges: the operator's list of the cluster's own networks
 * (TIDEPOOL_CLUSTER_CIDRS) and every cluster service named by an IP address in the settings (the registry, the
 * database, this node's advertised address), one host each. Names are left to the operator's list (they may move).
 */
export function clusterDeniedCidrs(config: ClusterHostSettings & { clusterCidrs: readonly string[] }): string[] {
  const literal = clusterHostsOf(config).filter((host) => net.isIP(host) !== 0).map((host) => `${canonical(host)}/${net.isIP(canonical(host)) === 4 ? 32 : 128}`);
  return [...new Set([...config.clusterCidrs, ...literal])];
}

/**
 * Whether an address is one of the cluster's own: any address of this machine (the node's or the API's own
 * interfaces), or what one of the cluster's service hosts resolves to (looked up again after a minute; a host that
 * does not resolve adds nothing).
 */
export class ClusterAddresses {
  private readonly resolved = new Map<string, { addresses: string[]; until: number }>();

  constructor(
    private readonly hosts: readonly string[],
    private readonly interfaces: () => NodeJS.Dict<os.NetworkInterfaceInfo[]> = os.networkInterfaces,
    private readonly resolve: (name: string) => Promise<string[]> = egressNameResolver.resolve,
  ) {}

  async includes(address: string): Promise<boolean> {
    const wanted = canonical(address);
    for (const entries of Object.values(this.interfaces())) {
      if (entries?.some((entry) => canonical(entry.address) === wanted)) return true;
    }
    for (const host of this.hosts) {
      if ((await this.addressesOf(host)).includes(wanted)) return true;
    }
    return false;
  }

  private async addressesOf(host: string): Promise<string[]> {
    if (net.isIP(host)) return [canonical(host)];
    const cached = this.resolved.get(host);
    if (cached && cached.until > Date.now()) return cached.addresses;
    const addresses = (await this.resolve(host).catch(() => [] as string[])).map(canonical);
    this.resolved.set(host, { addresses, until: Date.now() + RESOLVED_FOR_MS });
    return addresses;
  }
}
