import { hostname } from 'node:os';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { EngineFirewallCommands, type FirewallCommands, HostFirewallCommands } from './firewall-commands.ts';
import { type PlatformPeer, SandboxFirewall } from './sandbox-firewall.ts';

/** Docker's own switch for traffic between containers of one bridge; off on sandbox networks. */
export const ICC_OPTION = 'com.docker.network.bridge.enable_icc';
export const MANAGED_LABEL = 'dev.tidepool.managed';

/** `warn`: run without isolation (loudly) where rules cannot be installed; `require`: refuse to start. */
export type IsolationMode = 'warn' | 'require';

export interface IsolationOptions {
  docker: Docker;
  network: string;
  logger: Logger;
  mode: IsolationMode;
  /** Image for the helper container that installs rules when the platform runs in a container. */
  helperImage?: string;
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
  if (attached > 0 || info.Labels?.[MANAGED_LABEL] !== 'true') {
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
  return { Name: name, Driver: 'bridge', CheckDuplicate: true, Labels: { [MANAGED_LABEL]: 'true' }, Options: { [ICC_OPTION]: 'false' } };
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
    for (const match of text.matchAll(/^\s*nameserver\s+(\d+\.\d+\.\d+\.\d+)\s*$/gm)) if (!match[1]!.startsWith('127.')) found.add(match[1]!);
  }
  return [...found];
}

async function pickCommands({ docker, helperImage }: IsolationOptions): Promise<FirewallCommands> {
  const host = new HostFirewallCommands();
  const failures: string[] = [];
  try {
    await host.iptables(['-S', 'DOCKER-USER']);
    return host;
  } catch (error) {
    failures.push(`on this machine: ${(error as Error).message}`);
  }
  if (helperImage) {
    const engine = new EngineFirewallCommands(docker, helperImage);
    try {
      await engine.iptables(['-S', 'DOCKER-USER']);
      return engine;
    } catch (error) {
      failures.push(`through a helper container: ${(error as Error).message}`);
    }
  }
  throw new Error(failures.join('; '));
}

/**
 * Installs the isolation rules of the sandbox network. Where that is impossible, `warn` mode logs what
 * is exposed and how to fix it and carries on without rules; `require` mode throws.
 */
export async function isolateSandboxNetwork(options: IsolationOptions): Promise<SandboxFirewall | undefined> {
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
    return firewall;
  } catch (error) {
    const message =
      `SANDBOX ISOLATION IS OFF: cannot install iptables rules for network '${network}' (${(error as Error).message}). ` +
      'Sandboxes can reach each other, the host, the platform and private networks, and egress rules (allowOut/denyOut) are not enforced. ' +
      'Run the platform as root on the Docker host with iptables installed (apt-get install iptables), or give it the Docker socket and the base image for its helper container. ' +
      'Set TIDEPOOL_SANDBOX_ISOLATION=require to refuse to start instead.';
    if (mode === 'require') throw new Error(message);
    logger.error({ network }, message);
    return undefined;
  }
}
