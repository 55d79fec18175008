import type { EgressPolicy } from '../sandbox-runtime.ts';
import type { RedirectPorts, SandboxFirewall } from './sandbox-firewall.ts';

/** A sandbox's addresses on the sandbox network: IPv4 always, IPv6 where the network has it. */
export interface SandboxAddresses {
  ipv4: string;
  ipv6?: string;
}

/**
 * The firewall of one sandbox network in both families: the iptables rules, and the ip6tables rules when the
 * network has IPv6. `refusal` is set when the network has IPv6 but its rules could not be installed: no
 * sandbox may start there (over IPv6 it would reach the host and its neighbours).
 */
export class NetworkFirewall {
  constructor(
    readonly ipv4: SandboxFirewall,
    readonly ipv6: SandboxFirewall | undefined,
    readonly refusal: string | undefined,
  ) {}

  get where(): string {
    return this.ipv4.where;
  }

  setRedirect(ports: RedirectPorts): void {
    this.ipv4.setRedirect(ports);
  }

  private get all(): SandboxFirewall[] {
    return this.ipv6 ? [this.ipv4, this.ipv6] : [this.ipv4];
  }

  /**
   * Each family dispatches by the sandbox's address in it. A sandbox without an IPv6 address on an IPv6 network
   * (none sends from one) gets only its IPv4 rules; its old IPv6 dispatch, if any, goes.
   */
  async applySandbox(sandboxId: string, addresses: SandboxAddresses, policy: EgressPolicy): Promise<void> {
    await this.ipv4.applySandbox(sandboxId, addresses.ipv4, policy);
    if (!this.ipv6) return;
    if (addresses.ipv6) await this.ipv6.applySandbox(sandboxId, addresses.ipv6, policy);
    else await this.ipv6.removeSandbox(sandboxId);
  }

  async removeSandbox(sandboxId: string): Promise<void> {
    for (const firewall of this.all) await firewall.removeSandbox(sandboxId);
  }

  async sandboxesWithRules(): Promise<string[]> {
    const found = new Set<string>();
    for (const firewall of this.all) for (const id of await firewall.sandboxesWithRules()) found.add(id);
    return [...found];
  }
}
