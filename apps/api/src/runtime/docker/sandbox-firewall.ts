import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { EgressPolicy } from '../sandbox-runtime.ts';
import type { FirewallCommands } from './firewall-commands.ts';
import { ALWAYS_DENIED_V4, FAMILY_RULES, type FamilyRules, type IpFamily, familyPolicy, isOfFamily } from './firewall-family.ts';

/** Where TCP 80/443 of sandboxes that allow domains is redirected (the egress proxy's ports on the gateway). */
export interface RedirectPorts {
  http: number;
  tls: number;
  /** Where all TCP of sandboxes with their own egress proxy goes (see EgressTunnel); absent: not available. */
  tunnel?: number;
  /**
   * Where TCP 80/443 to allowed CIDRs of sandboxes with network.rules transforms goes (see EgressProxyPorts), so that
   * a rule for a name applies also when the name's address is allowed; absent: such connections go direct.
   */
  allowedHttp?: number;
  allowedTls?: number;
}

/** Never reachable from a sandbox over IPv4 (IPv6: ALWAYS_DENIED_V6 in firewall-family.ts). */
export const ALWAYS_DENIED = ALWAYS_DENIED_V4;

/** Tag in the comment of every rule the platform adds to a built-in chain (DOCKER-USER, INPUT). */
export const RULE_TAG = 'tidepool-isolation';
const SANDBOX_TAG = 'tidepool-sandbox';

export interface SandboxBridge {
  /** Docker network name (appears in rule comments). */
  name: string;
  /** Docker network id: chain names are derived from it. */
  id: string;
  /** Linux bridge interface of the network. */
  bridge: string;
}

/** The platform itself when it runs in a container on the sandbox network (docker-compose.yml). */
export interface PlatformPeer {
  address: string;
  mac: string;
}

export interface FirewallOptions {
  commands: FirewallCommands;
  network: SandboxBridge;
  logger: Logger;
  /** DNS servers Docker's embedded resolver forwards to: reachable on port 53 even when private (those of other families are skipped). */
  resolvers: string[];
  /** The platform's container on the network (IPv4 only: the platform reaches sandboxes over IPv4). */
  peer?: PlatformPeer;
  /** iptables (default) or ip6tables: `commands` must run the matching programs. */
  family?: IpFamily;
}

/**
 * iptables rules that isolate the sandboxes of one bridge network and enforce their egress rules.
 *
 * * `TP-FWD-<net>` (jumped to from DOCKER-USER for packets entering from the bridge): replies pass; new
 *   connections to the bridge itself (another sandbox) are refused, except from the platform's own container;
 *   DNS to the host's resolvers passes; the always-denied ranges are refused; then `TP-SBX-<net>` dispatches
 *   by source address to the sandbox's own chain (`TP-S-<hash>`: allowed CIDRs return, denied CIDRs are refused).
 * * `TP-IN-<net>` (from INPUT): a sandbox opens no connection to the host (gateway, published ports, the API).
 *
 * Each chain is replaced in one `iptables-restore` transaction, so rules change atomically.
 */
export class SandboxFirewall {
  private readonly forward: string;
  private readonly input: string;
  private readonly dispatch: string;
  /** nat PREROUTING: where sandboxes with domain rules are redirected to the egress proxy. */
  private readonly natDispatch: string;
  private redirect: RedirectPorts | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly rules: FamilyRules;

  constructor(private readonly options: FirewallOptions) {
    this.rules = FAMILY_RULES[options.family ?? 'ipv4'];
    const short = options.network.id.slice(0, 12);
    this.forward = `TP-FWD-${short}`;
    this.input = `TP-IN-${short}`;
    this.dispatch = `TP-SBX-${short}`;
    this.natDispatch = `TP-NAT-${short}`;
  }

  /** From now on, sandboxes with allowed domains send TCP 80/443 to these ports (see EgressProxy). */
  setRedirect(ports: RedirectPorts): void {
    this.redirect = ports;
  }

  get where(): string {
    return this.options.commands.where;
  }

  get family(): IpFamily {
    return this.rules.family;
  }

  /** The two REJECT rules for `match` ('' for every packet), single-spaced as the docker gate requires. */
  private reject(match: string): string[] {
    const prefix = match ? `${match} ` : '';
    return [`${prefix}-p tcp -j REJECT --reject-with tcp-reset`, `${prefix}-j REJECT --reject-with ${this.rules.rejectUnreachable}`];
  }

  /**
   * Where forwarded packets are hooked: DOCKER-USER, which Docker makes and keeps first in FORWARD. Docker makes
   * no ip6tables chains unless its own ip6tables support is on: then IPv6 hooks FORWARD itself.
   */
  private async forwardHook(): Promise<string> {
    if (this.rules.family === 'ipv4') return 'DOCKER-USER';
    try {
      await this.options.commands.iptables(['-t', 'filter', '-S', 'DOCKER-USER']);
      return 'DOCKER-USER';
    } catch {
      return 'FORWARD';
    }
  }

  /** Runs firewall changes one at a time (each reads the current rules before it writes). */
  private serial<T>(operation: () => Promise<T>): Promise<T> {
    const next = this.queue.then(operation, operation);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Installs (or replaces) the network's rules and hooks them into DOCKER-USER and INPUT. Idempotent. */
  install(): Promise<void> {
    return this.serial(async () => {
      const { commands, network, peer } = this.options;
      const { family, hostBits, neighbourDiscovery, redirects } = this.rules;
      const resolvers = this.options.resolvers.filter((ip) => isOfFamily(family, ip));
      for (const chain of [this.forward, this.input, this.dispatch]) await this.ensureChain(chain);
      if (redirects) await this.ensureChain(this.natDispatch, 'nat');
      const forward = [
        '-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
        ...neighbourDiscovery,
        ...(peer && family === 'ipv4' ? [`-s ${peer.address}/32 -m mac --mac-source ${peer.mac} -j ACCEPT`] : []),
        ...this.reject(`-o ${network.bridge}`),
        ...resolvers.flatMap((ip) => [`-d ${ip}/${hostBits} -p udp --dport 53 -j RETURN`, `-d ${ip}/${hostBits} -p tcp --dport 53 -j RETURN`]),
        ...this.rules.alwaysDenied.flatMap((cidr) => this.reject(`-d ${cidr}`)),
        `-j ${this.dispatch}`,
      ];
      // Connections redirected to the egress proxy are the only new ones a sandbox may open to the host.
      const input = [
        '-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN',
        ...neighbourDiscovery,
        ...(redirects ? ['-p tcp -m conntrack --ctstate DNAT -j RETURN'] : []),
        ...this.reject(''),
      ];
      await commands.restore(
        [
          '*filter',
          `:${this.forward} - [0:0]`,
          `:${this.input} - [0:0]`,
          ...forward.map((rule) => `-A ${this.forward} ${rule}`),
          ...input.map((rule) => `-A ${this.input} ${rule}`),
          'COMMIT',
          '',
        ].join('\n'),
      );
      const forwardHook = await this.forwardHook();
      await this.hook(forwardHook, this.forward);
      // A hook left in FORWARD from before Docker's ip6tables support was turned on goes.
      if (forwardHook === 'DOCKER-USER' && family === 'ipv6') await this.unhook('FORWARD');
      await this.hook('INPUT', this.input);
      if (redirects) await this.hook('PREROUTING', this.natDispatch, 'nat');
      this.options.logger.info({ network: network.name, bridge: network.bridge, via: commands.where, family, forwardHook }, 'sandbox network isolation rules installed');
    });
  }

  private async ensureChain(chain: string, table = 'filter'): Promise<void> {
    try {
      await this.options.commands.iptables(['-t', table, '-N', chain]);
    } catch (error) {
      if (!/exists/i.test(String((error as Error).message))) throw error;
    }
  }

  /** Removes every tagged jump of this network from a built-in chain. */
  private async unhook(builtin: string): Promise<void> {
    const { commands, network } = this.options;
    const tag = `${RULE_TAG}/${network.name}`;
    const existing = (await commands.iptables(['-t', 'filter', '-S', builtin])).split('\n').filter((line) => tagged(line, tag));
    for (const line of existing) await commands.iptables(['-t', 'filter', '-D', builtin, ...splitRule(line).slice(2)]);
  }

  /** One tagged jump from a built-in chain to ours, first in it; stale tagged jumps (an older bridge) go. */
  private async hook(builtin: string, target: string, table = 'filter'): Promise<void> {
    const { commands, network } = this.options;
    const tag = `${RULE_TAG}/${network.name}`;
    const wanted = `-i ${network.bridge} -m comment --comment ${tag} -j ${target}`;
    const existing = (await commands.iptables(['-t', table, '-S', builtin])).split('\n').filter((line) => tagged(line, tag));
    let present = false;
    for (const line of existing) {
      if (normalise(line) === normalise(`-A ${builtin} ${wanted}`) && !present) {
        present = true;
        continue;
      }
      await commands.iptables(['-t', table, '-D', builtin, ...splitRule(line).slice(2)]);
    }
    if (!present) await commands.iptables(['-t', table, '-I', builtin, '1', ...wanted.split(' ')]);
  }

  /** Replaces the sandbox's egress rules (and where its address dispatches to them) in one transaction. */
  applySandbox(sandboxId: string, address: string, policy: EgressPolicy): Promise<void> {
    return this.serial(() =>
      this.retryOnce(async () => {
        const chain = sandboxChain(sandboxId);
        const natChain = sandboxChain(sandboxId, 'TP-R-');
        const { hostBits, redirects } = this.rules;
        const mine = (line: string): boolean => tagged(line, `${SANDBOX_TAG}/${sandboxId}`) || line.includes(` -s ${address}/${hostBits} `);
        const stale = await this.dispatchRules(mine);
        const staleNat = redirects ? await this.dispatchRules(mine, 'nat') : [];
        const own = familyPolicy(this.rules.family, policy);
        const transformed = policy.transforms !== undefined && Object.keys(policy.transforms).length > 0;
        const redirect = redirects && this.redirect && ((policy.domains ?? []).length > 0 || policy.transforms !== undefined) ? this.redirect : undefined;
        const tunnel = redirects && policy.upstream ? this.redirect?.tunnel : undefined;
        if (redirects && policy.upstream && tunnel === undefined) throw new Error('the egress tunnel is not running: a sandbox with its own egress proxy cannot be given rules');
        const natRules = tunnel
          ? [
              // DNS over TCP to the host's resolvers stays direct (as UDP DNS does); every other TCP connection is tunnelled.
              ...this.options.resolvers.map((ip) => `-d ${ip}/32 -p tcp --dport 53 -j RETURN`),
              `-p tcp -j REDIRECT --to-ports ${tunnel}`,
            ]
          : redirect
          ? [
              ...own.allow.flatMap((cidr) => [
                // With transforms, HTTP/TLS to an allowed CIDR passes the proxy too: a rule for a name applies whatever else is allowed.
                ...(transformed && redirect.allowedHttp !== undefined && redirect.allowedTls !== undefined
                  ? [`-d ${cidr} -p tcp --dport 80 -j REDIRECT --to-ports ${redirect.allowedHttp}`, `-d ${cidr} -p tcp --dport 443 -j REDIRECT --to-ports ${redirect.allowedTls}`]
                  : []),
                `-d ${cidr} -j RETURN`,
              ]),
              `-p tcp --dport 80 -j REDIRECT --to-ports ${redirect.http}`,
              `-p tcp --dport 443 -j REDIRECT --to-ports ${redirect.tls}`,
            ]
          : [];
        const rules = [...own.allow.map((cidr) => `-d ${cidr} -j RETURN`), ...own.deny.flatMap((cidr) => this.reject(`-d ${cidr}`))];
        await this.options.commands.restore(
          [
            '*filter',
            `:${chain} - [0:0]`,
            ...rules.map((rule) => `-A ${chain} ${rule}`),
            ...stale.map((line) => line.replace(/^-A /, '-D ')),
            `-A ${this.dispatch} -s ${address}/${hostBits} -m comment --comment ${SANDBOX_TAG}/${sandboxId} -j ${chain}`,
            'COMMIT',
            ...(redirects
              ? [
                  '*nat',
                  `:${natChain} - [0:0]`,
                  ...natRules.map((rule) => `-A ${natChain} ${rule}`),
                  ...staleNat.map((line) => line.replace(/^-A /, '-D ')),
                  `-A ${this.natDispatch} -s ${address}/32 -m comment --comment ${SANDBOX_TAG}/${sandboxId} -j ${natChain}`,
                  'COMMIT',
                ]
              : []),
            '',
          ].join('\n'),
        );
        this.options.logger.debug({ sandboxId, address, family: this.rules.family, allow: own.allow, deny: own.deny, domains: redirect ? policy.domains : [], tunnelled: tunnel !== undefined }, 'sandbox egress rules applied');
      }),
    );
  }

  /** Drops the sandbox's rules (its container is gone; its address may be handed to another one). */
  removeSandbox(sandboxId: string): Promise<void> {
    return this.serial(() =>
      this.retryOnce(async () => {
        const chain = sandboxChain(sandboxId);
        const natChain = sandboxChain(sandboxId, 'TP-R-');
        const { redirects } = this.rules;
        const mine = (line: string): boolean => tagged(line, `${SANDBOX_TAG}/${sandboxId}`);
        const stale = await this.dispatchRules(mine);
        const staleNat = redirects ? await this.dispatchRules(mine, 'nat') : [];
        const exists = await this.chainExists('filter', chain);
        const natExists = redirects && (await this.chainExists('nat', natChain));
        if (stale.length === 0 && staleNat.length === 0 && !exists && !natExists) return;
        await this.options.commands.restore(
          [
            '*filter',
            ...stale.map((line) => line.replace(/^-A /, '-D ')),
            ...(exists ? [`-F ${chain}`, `-X ${chain}`] : []),
            'COMMIT',
            ...(redirects ? ['*nat', ...staleNat.map((line) => line.replace(/^-A /, '-D ')), ...(natExists ? [`-F ${natChain}`, `-X ${natChain}`] : []), 'COMMIT'] : []),
            '',
          ].join('\n'),
        );
        this.options.logger.debug({ sandboxId, family: this.rules.family }, 'sandbox egress rules removed');
      }),
    );
  }

  /** Whether `chain` exists: listed by name (the docker gate lists no whole table), a chain that is not there fails. */
  private chainExists(table: 'filter' | 'nat', chain: string): Promise<boolean> {
    return this.options.commands.iptables(['-t', table, '-S', chain]).then(
      (listing) => listing.split('\n').includes(`-N ${chain}`),
      () => false,
    );
  }

  /** Sandboxes that have rules on this network (to drop the ones whose container is gone). */
  async sandboxesWithRules(): Promise<string[]> {
    const lines = await this.dispatchRules(() => true);
    return lines.map((line) => new RegExp(`${SANDBOX_TAG}/([A-Za-z0-9_-]+)`).exec(line)?.[1]).filter((id): id is string => id !== undefined);
  }

  private async dispatchRules(match: (line: string) => boolean, table: 'filter' | 'nat' = 'filter'): Promise<string[]> {
    const chain = table === 'nat' ? this.natDispatch : this.dispatch;
    const lines = (await this.options.commands.iptables(['-t', table, '-S', chain])).split('\n');
    return lines.filter((line) => line.startsWith(`-A ${chain} `) && match(line));
  }

  /** Another platform on the same network may have just changed the dispatch chain: read again and retry. */
  private async retryOnce(operation: () => Promise<void>): Promise<void> {
    try {
      await operation();
    } catch {
      await operation();
    }
  }
}

export function sandboxChain(sandboxId: string, prefix = 'TP-S-'): string {
  return `${prefix}${createHash('sha256').update(sandboxId).digest('hex').slice(0, 20)}`;
}

/** The rule carries exactly this comment (iptables prints it quoted or not, depending on the variant). */
function tagged(line: string, comment: string): boolean {
  return splitRule(line).some((arg, i, args) => arg === comment && args[i - 1] === '--comment');
}

function normalise(rule: string): string {
  return splitRule(rule).join(' ');
}

/** Splits an `iptables -S` line into arguments (comments may be quoted). */
export function splitRule(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}
