import { isIP } from 'node:net';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { PlatformError } from '../../errors.ts';
import type { EgressPolicy } from '../../runtime/sandbox-runtime.ts';
import { normaliseRules } from '../../runtime/network-transforms.ts';
import type { SandboxNetwork } from '../registry/sandbox-record.ts';
import { parseEgressProxy, type StoredEgressProxy, upstreamOf } from './egress-proxy-settings.ts';

const ALL_TRAFFIC = '0.0.0.0/0';
const DOMAIN = /^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+$/i;

export function isCidrOrIp(value: string): boolean {
  const [address, prefix, extra] = value.split('/');
  // A zone index (fe80::1%eth0) names an interface of the host: no firewall rule takes it.
  if (extra !== undefined || address!.includes('%')) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return address !== '0.0.0.0' && address !== '::';
  if (!/^\d+$/.test(prefix)) return false;
  const bits = Number(prefix);
  return bits <= (family === 4 ? 32 : 128) && (address !== '0.0.0.0' || bits === 0);
}

/** Validates egress and routing settings the way the reference platform does, with its messages. */
export function validateNetwork(network: Omit<SandboxNetwork, 'rules' | 'egressProxy'> & { rules?: unknown; egressProxy?: unknown }): void {
  const rules = normaliseRules(network.rules);
  const proxy = parseEgressProxy(network.egressProxy);
  if (rules && Object.keys(rules).length > 0 && proxy) refuseRulesWithProxy();
  if (network.httpsPorts?.includes(ENVD_PORT)) throw new PlatformError('invalid', `httpsPorts cannot list the envd port ${ENVD_PORT}`);
  for (const entry of network.denyOut ?? []) {
    if (!isCidrOrIp(entry)) throw new PlatformError('invalid', `invalid denied CIDR ${entry}`);
  }
  const domains = (network.allowOut ?? []).filter((entry) => !isCidrOrIp(entry));
  for (const domain of domains) {
    if (!DOMAIN.test(domain)) throw new PlatformError('invalid', `invalid allowed entry ${domain}: not a CIDR, IP address or domain name`);
  }
  if (domains.length > 0 && !(network.denyOut ?? []).includes(ALL_TRAFFIC)) {
    throw new PlatformError('invalid', "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out (0.0.0.0/0)");
  }
  const mask = network.maskRequestHost;
  if (mask !== undefined && !/^[\x21-\x7e]+$/.test(mask)) throw new PlatformError('invalid', 'maskRequestHost must be an ASCII host[:port]');
}

/** Transforms are applied by the platform's egress proxy, which a sandbox with its own proxy does not pass. */
function refuseRulesWithProxy(): never {
  throw new PlatformError('invalid', 'network.rules cannot be combined with network.egressProxy: traffic through your own proxy is not transformed');
}

const asCidr = (entry: string): string => (entry.includes('/') ? entry : `${entry}/${isIP(entry) === 4 ? 32 : 128}`);

/**
 * The address part of a sandbox's egress rules, IPv4 and IPv6 (bare IPs as /32 or /128), for the firewall, and its own
 * egress proxy when it has one (`openPassword` opens the sealed password; without it such a policy cannot be made).
 */
export function egressPolicy(network: SandboxNetwork, openPassword?: (sealed: string) => string): EgressPolicy {
  const policy: EgressPolicy = {
    allow: (network.allowOut ?? []).filter(isCidrOrIp).map(asCidr),
    deny: (network.denyOut ?? []).filter(isCidrOrIp).map(asCidr),
    domains: allowedDomains(network),
    ...(network.rules ? { transforms: network.rules } : {}),
  };
  if (network.egressProxy) {
    const open = openPassword ?? (() => {
      throw new PlatformError('internal', 'the sandbox has an egress proxy but its password cannot be opened here');
    });
    policy.upstream = upstreamOf(network.egressProxy, open);
  }
  return policy;
}

/** Allowed domain names (exact or `*.` wildcards), enforced on HTTP (Host) and TLS (SNI). */
export function allowedDomains(network: SandboxNetwork): string[] {
  return (network.allowOut ?? []).filter((entry) => !isCidrOrIp(entry)).map((d) => d.toLowerCase());
}

export interface NetworkUpdate {
  /** Validated with parseEgressProxy; admitted (sealed) by the lifecycle and passed to egressUpdate. */
  egressProxy?: unknown;
  allowOut?: string[];
  denyOut?: string[];
  allow_internet_access?: boolean;
  rules?: unknown;
}

/**
 * `PUT /sandboxes/{id}/network` replaces the egress rules: an omitted list is cleared, and
 * `allow_internet_access: false` denies all traffic (0.0.0.0/0) but what is allowed. Validated like create. The egress
 * proxy is replaced too: `proxy` is the admitted `update.egressProxy`, and without one the sandbox goes out directly.
 */
export function egressUpdate(current: SandboxNetwork, update: NetworkUpdate, proxy?: StoredEgressProxy): SandboxNetwork {
  const next: SandboxNetwork = { ...current, allowOut: update.allowOut, denyOut: update.denyOut, rules: normaliseRules(update.rules), egressProxy: proxy };
  if (next.rules === undefined) delete next.rules;
  if (!proxy) delete next.egressProxy;
  if (next.rules && Object.keys(next.rules).length > 0 && proxy) refuseRulesWithProxy();
  if (update.allow_internet_access === false) next.denyOut = [ALL_TRAFFIC];
  validateNetwork({ ...next, egressProxy: undefined });
  return next;
}
