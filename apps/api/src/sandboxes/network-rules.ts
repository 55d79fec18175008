import { isIP } from 'node:net';
import { PlatformError } from '../errors.ts';
import type { EgressPolicy } from '../runtime/sandbox-runtime.ts';
import type { SandboxNetwork } from './sandbox-record.ts';
import { parseEgressProxy, type StoredEgressProxy, upstreamOf } from './egress-proxy-settings.ts';

const ALL_TRAFFIC = '0.0.0.0/0';
const DOMAIN = /^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+$/i;

export function isCidrOrIp(value: string): boolean {
  const [address, prefix, extra] = value.split('/');
  if (extra !== undefined) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return address !== '0.0.0.0' && address !== '::';
  if (!/^\d+$/.test(prefix)) return false;
  const bits = Number(prefix);
  return bits <= (family === 4 ? 32 : 128) && (address !== '0.0.0.0' || bits === 0);
}

const ENVD_PORT = 49983;

/** Network settings the SDK can send that this platform does not implement: refused, never silently ignored. */
export interface UnsupportedNetworkFields {
  rules?: unknown;
}

export function refuseUnsupportedNetwork(fields: UnsupportedNetworkFields): void {
  const rules = fields.rules;
  if (rules !== undefined && rules !== null && (typeof rules !== 'object' || Object.keys(rules).length > 0)) {
    throw new PlatformError('invalid', 'network.rules is not supported by this platform: egress requests cannot be transformed (no header injection)');
  }
}

/** Validates egress and routing settings the way the reference platform does, with its messages. */
export function validateNetwork(network: Omit<SandboxNetwork, 'egressProxy'> & UnsupportedNetworkFields & { egressProxy?: unknown }): void {
  refuseUnsupportedNetwork(network);
  parseEgressProxy(network.egressProxy);
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

const ipv4 = (entry: string): boolean => isCidrOrIp(entry) && isIP(entry.split('/')[0]!) === 4;
const asCidr = (entry: string): string => (entry.includes('/') ? entry : `${entry}/32`);

/**
 * The IPv4 part of a sandbox's egress rules (bare IPs as /32), for the firewall, and its own egress proxy when it
 * has one (`openPassword` opens the sealed password; without it such a policy cannot be made).
 */
export function egressPolicy(network: SandboxNetwork, openPassword?: (sealed: string) => string): EgressPolicy {
  const policy: EgressPolicy = {
    allow: (network.allowOut ?? []).filter(ipv4).map(asCidr),
    deny: (network.denyOut ?? []).filter(ipv4).map(asCidr),
    domains: allowedDomains(network),
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

export interface NetworkUpdate extends UnsupportedNetworkFields {
  /** Validated with parseEgressProxy; admitted (sealed) by the lifecycle and passed to egressUpdate. */
  egressProxy?: unknown;
  allowOut?: string[];
  denyOut?: string[];
  allow_internet_access?: boolean;
}

/**
 * `PUT /sandboxes/{id}/network` replaces the egress rules: an omitted list is cleared, and
 * `allow_internet_access: false` denies all traffic (0.0.0.0/0) but what is allowed. Validated like create. The egress
 * proxy is replaced too: `proxy` is the admitted `update.egressProxy`, and without one the sandbox goes out directly.
 */
export function egressUpdate(current: SandboxNetwork, update: NetworkUpdate, proxy?: StoredEgressProxy): SandboxNetwork {
  refuseUnsupportedNetwork(update);
  const next: SandboxNetwork = { ...current, allowOut: update.allowOut, denyOut: update.denyOut, egressProxy: proxy };
  if (!proxy) delete next.egressProxy;
  if (update.allow_internet_access === false) next.denyOut = [ALL_TRAFFIC];
  validateNetwork({ ...next, egressProxy: undefined });
  return next;
}
