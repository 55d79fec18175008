import { isIP } from 'node:net';
import { PlatformError } from '../errors.ts';
import type { EgressPolicy } from '../runtime/sandbox-runtime.ts';
import { normaliseRules } from './network-transforms.ts';
import type { SandboxNetwork } from './sandbox-record.ts';

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

const ENVD_PORT = 49983;

/** Network settings the SDK can send that this platform does not implement: refused, never silently ignored. */
export interface UnsupportedNetworkFields {
  egressProxy?: unknown;
}

export function refuseUnsupportedNetwork(fields: UnsupportedNetworkFields): void {
  if (fields.egressProxy !== undefined && fields.egressProxy !== null) {
    throw new PlatformError('invalid', 'network.egressProxy is not supported by this platform: sandbox traffic cannot be sent through an upstream SOCKS5 proxy');
  }
}

/** Validates egress and routing settings the way the reference platform does, with its messages. */
export function validateNetwork(network: Omit<SandboxNetwork, 'rules'> & UnsupportedNetworkFields & { rules?: unknown }): void {
  refuseUnsupportedNetwork(network);
  normaliseRules(network.rules);
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

const asCidr = (entry: string): string => (entry.includes('/') ? entry : `${entry}/${isIP(entry) === 4 ? 32 : 128}`);

/** The address part of a sandbox's egress rules, IPv4 and IPv6 (bare IPs as /32 or /128), for the firewall. */
export function egressPolicy(network: SandboxNetwork): EgressPolicy {
  return {
    allow: (network.allowOut ?? []).filter(isCidrOrIp).map(asCidr),
    deny: (network.denyOut ?? []).filter(isCidrOrIp).map(asCidr),
    domains: allowedDomains(network),
    ...(network.rules ? { transforms: network.rules } : {}),
  };
}

/** Allowed domain names (exact or `*.` wildcards), enforced on HTTP (Host) and TLS (SNI). */
export function allowedDomains(network: SandboxNetwork): string[] {
  return (network.allowOut ?? []).filter((entry) => !isCidrOrIp(entry)).map((d) => d.toLowerCase());
}

export interface NetworkUpdate extends UnsupportedNetworkFields {
  allowOut?: string[];
  denyOut?: string[];
  allow_internet_access?: boolean;
  rules?: unknown;
}

/**
 * `PUT /sandboxes/{id}/network` replaces the egress rules: an omitted list is cleared, and
 * `allow_internet_access: false` denies all traffic (0.0.0.0/0) but what is allowed. Validated like create.
 */
export function egressUpdate(current: SandboxNetwork, update: NetworkUpdate): SandboxNetwork {
  refuseUnsupportedNetwork(update);
  const next: SandboxNetwork = { ...current, allowOut: update.allowOut, denyOut: update.denyOut, rules: normaliseRules(update.rules) };
  if (next.rules === undefined) delete next.rules;
  if (update.allow_internet_access === false) next.denyOut = [ALL_TRAFFIC];
  validateNetwork(next);
  return next;
}
