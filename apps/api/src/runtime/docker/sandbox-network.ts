import { isIPv4, isIPv6 } from 'node:net';
import { hostname } from 'node:os';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { EngineFirewallCommands, FIREWALL_PROGRAMS, type FirewallCommands, HostFirewallCommands } from './firewall-commands.ts';
import type { IpFamily } from './firewall-family.ts';
import { NetworkFirewall } from './network-firewall.ts';
import { type PlatformPeer, SandboxFirewall } from './sandbox-firewall.ts';
import { MANAGED_NETWORK_LABEL } from './docker-labels.ts';

/** Docker's own switch for traffic between containers of one bridge; off on sandbox networks. */
export const ICC_OPTION = 'com.docker.network.bridge.enable_icc';

/** `warn`: run without isolation (loudly) where rules cannot be installed; `require`: refuse to start. */
export type IsolationMode = 'warn' | 'require';

export interface IsolationOptions {
  docker: Docker;
  network: string;
  logger: Logger;
  mode: IsolationMode;
  /** Image for the helper container that installs rules when the platform runs in a container. */
  helperImage?: string;
  /** Other firewall programs per family (tests: a missing ip6tables); FIREWALL_PROGRAMS by default. */
  programs?: Partial<typeof FIREWALL_PROGRAMS>;
}

type NetworkInfo = Awaited<ReturnType<Docker.Network['inspect']>>;

/**
 * A sandbox network made before isolation existed lets containers talk to each other. When none is attached
 * to it (and it is ours), it is made again with inter-container traffic off; otherwise the firewall rules
 * alone keep sandboxes apart.
 */
export async function recreateIfOpen(docker: Docker, name: string, logger: Logger): Promise<void> {
  const info = (await docker.getNetwork(name).inspect()) as NetworkInfo;
  if (info.Options?.[ICC_OPTION] === 'false' || info.Driver !== 'bridge') return;
  const attached = Object.keys(info.Containers ?? {}).length;
  if (attached > 0 || info.Labels?.[MANAGED_NETWORK_LABEL] !== 'true') {
    logger.warn({ network: name, attached }, 'sandbox network allows inter-container traffic (made before isolation); the firewall rules keep sandboxes apart. Recreate it when no container uses it');
    return;
  }
  try {
    await docker.getNetwork(info.Id).remove();
    await docker.createNetwork(networkSpec(name));
    logger.info({ network: name }, 'recreated sandbox network with inter-container traffic off');
  } catch (error) {
    // Another platform sharing the engine is doing the same, or a container joined in between.
    logger.debug({ network: name, err: error }, 'sandbox network not recreated');
  }
}

export function networkSpec(name: string): Docker.NetworkCreateOptions {
  return { Name: name, Driver: 'bridge', CheckDuplicate: true, Labels: { [MANAGED_NETWORK_LABEL]: 'true' }, Options: { [ICC_OPTION]: 'false' } };
}

/** The platform's own container when it runs on the sandbox network (docker-compose.yml). */
function platformPeer(info: NetworkInfo): PlatformPeer | undefined {
  const self = hostname();
  if (!/^[0-9a-f]{12}$/.test(self)) return undefined;
  const entry = Object.entries(info.Containers ?? {}).find(([id]) => id.startsWith(self));
  if (!entry) return undefined;
  const { IPv4Address, MacAddress } = entry[1] as { IPv4Address: string; MacAddress: string };
  return { address: IPv4Address.split('/')[0]!, mac: MacAddress };
}

/** Where Docker's embedded DNS forwards to: the host's resolvers (loopback ones are queried from the host). */
async function resolvers(commands: FirewallCommands): Promise<string[]> {
  const found = new Set<string>();
  for (const file of ['/etc/resolv.conf', '/run/systemd/resolve/resolv.conf']) {
    const text = await commands.hostFile(file);
    for (const match of text.matchAll(/^\s*nameserver\s+(\S+)\s*$/gm)) {
      const ip = match[1]!;
      // Loopback resolvers are queried from the host; a scoped link-local one (fe80::1%eth0) is not routed.
      if ((isIPv4(ip) && !ip.startsWith('127.')) || (isIPv6(ip) && ip !== '::1' && !ip.toLowerCase().startsWith('fe80:'))) found.add(ip);
    }
  }
  return [...found];
}

/** A chain every host with the family's firewall has: listing it proves the programs run. */
const PROBE_CHAIN: Record<IpFamily, string> = { ipv4: 'DOCKER-USER', ipv6: 'INPUT' };

async function pickCommands({ docker, helperImage, programs }: IsolationOptions, family: IpFamily = 'ipv4'): Promise<FirewallCommands> {
  const chosen = programs?.[family] ?? FIREWALL_PROGRAMS[family];
  const host = new HostFirewallCommands(chosen);
  const failures: string[] = [];
  const probe = ['-S', PROBE_CHAIN[family]];
  try {
    await host.iptables(probe);
    return host;
  } catch (error) {
    failures.push(`on this machine: ${(error as Error).message}`);
  }
  if (helperImage) {
    const engine = new EngineFirewallCommands(docker, helperImage, chosen);
    try {
      await engine.iptables(probe);
      return engine;
    } catch (error) {
      failures.push(`through a helper container: ${(error as Error).message}`);
    }
  }
  throw new Error(failures.join('; '));
}

/** Whether Docker gave the network IPv6 (an IPv6 subnet; its sandboxes get IPv6 addresses). */
export function hasIpv6(info: NetworkInfo): boolean {
  return info.EnableIPv6 === true;
}

/**
 * The ip6tables rules of an IPv6 sandbox network, or why there are none: then no sandbox may start there.
 * Over IPv6, Docker's own switch for traffic between containers (enable_icc) does nothing without its
 * experimental ip6tables support, so neighbours and the host would be open.
 */
async function isolateIpv6(options: IsolationOptions, info: NetworkInfo, bridge: string): Promise<{ firewall?: SandboxFirewall; refusal?: string }> {
  const { network, logger } = options;
  try {
    const commands = await pickCommands(options, 'ipv6');
    const firewall = new SandboxFirewall({ commands, logger, family: 'ipv6', network: { name: network, id: info.Id, bridge }, resolvers: await resolvers(commands) });
    await firewall.install();
    return { firewall };
  } catch (error) {
    const refusal =
      `sandbox network '${network}' has IPv6 but its ip6tables rules cannot be installed (${(error as Error).message}); ` +
      'no sandbox starts there: over IPv6 it could reach the host, its neighbours and addresses its egress rules deny. ' +
      'Install ip6tables on the Docker host (apt-get install iptables), or use a sandbox network without IPv6 (TIDEPOOL_SANDBOX_NETWORK).';
    logger.error({ network }, refusal);
    return { refusal };
  }
}

/**
 * Installs the isolation rules of the sandbox network (ip6tables too when it has IPv6). Where that is impossible,
 * `warn` mode logs what is exposed and how to fix it and carries on without rules; `require` mode throws.
 */
export async function isolateSandboxNetwork(options: IsolationOptions): Promise<NetworkFirewall | undefined> {
  const { docker, network, logger, mode } = options;
  const info = (await docker.getNetwork(network).inspect()) as NetworkInfo;
  const bridge = info.Options?.['com.docker.network.bridge.name'] || `br-${info.Id.slice(0, 12)}`;
  try {
    const commands = await pickCommands(options);
    const firewall = new SandboxFirewall({
      commands,
      logger,
      network: { name: network, id: info.Id, bridge },
      peer: platformPeer(info),
      resolvers: await resolvers(commands),
    });
    await firewall.install();
    const ipv6 = hasIpv6(info) ? await isolateIpv6(options, info, bridge) : {};
    return new NetworkFirewall(firewall, ipv6.firewall, ipv6.refusal);
  } catch (error) {
    const message =
      `SANDBOX ISOLATION IS OFF: cannot install iptables rules for network '${network}' (${(error as Error).message}). ` +
      'Sandboxes can reach each other, the host, the platform and private networks, and egress rules (allowOut/denyOut) are not enforced' +
      (hasIpv6(info) ? ', over IPv4 and IPv6. ' : '. ') +
      'Run the platform as root on the Docker host with iptables installed (apt-get install iptables), or give it the Docker socket and the base image for its helper container. ' +
      'Set TIDEPOOL_SANDBOX_ISOLATION=require to refuse to start instead.';
    if (mode === 'require') throw new Error(message);
    logger.error({ network }, message);
    return undefined;
  }
}
