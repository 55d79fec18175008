import net from 'node:net';
import { PlatformError } from '../../errors.ts';
import type { EgressUpstream, UpstreamProtocol } from '../../runtime/docker/egress-upstream.ts';

/**
 * `network.egressProxy` (`{address, username?, password?}`): the user's own proxy all the sandbox's TCP leaves
 * through. `address` is `host:port` (SOCKS5, as the reference platform), `socks5://host:port`, or `http://host:port`
 * (HTTP CONNECT). Credentials go in `username`/`password`, never in the address.
 */
export interface EgressProxyRequest {
  /** As the user wrote it (trimmed): shown back by getInfo. */
  address: string;
  protocol: UpstreamProtocol;
  host: string;
  port: number;
  username?: string;
  password?: string;
}

/** As kept in the sandbox's record: the password sealed with the secrets key (see egress-proxy-passwords.ts). */
export interface StoredEgressProxy {
  address: string;
  protocol: UpstreamProtocol;
  host: string;
  port: number;
  username?: string;
  /** base64 of the sealed password. */
  sealedPassword?: string;
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;
const FIELDS = new Set(['address', 'username', 'password']);

const invalid = (message: string): PlatformError => new PlatformError('invalid', `network.egressProxy: ${message}`);

function credential(value: unknown, field: 'username' | 'password'): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid(`${field} must be a string`);
  if (Buffer.byteLength(value, 'utf8') > 255) throw invalid(`${field} must be at most 255 bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(value)) throw invalid(`${field} must not contain control characters (CR, LF, NUL…)`);
  return value;
}

/** The proxy asked for, validated (no network access); null/undefined: none. Throws PlatformError('invalid'). */
export function parseEgressProxy(raw: unknown): EgressProxyRequest | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw invalid('must be an object {address, username?, password?}');
  const unknown = Object.keys(raw).filter((key) => !FIELDS.has(key));
  if (unknown.length > 0) throw invalid(`unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')} (expected address, username, password)`);
  const fields = raw as Record<string, unknown>;
  if (typeof fields.address !== 'string' || fields.address.trim() === '') throw invalid('address is required: host:port, socks5://host:port or http://host:port');
  const address = fields.address.trim();
  if (address.length > 300) throw invalid('address is too long');
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(address);
  let protocol: UpstreamProtocol = 'socks5';
  if (scheme) {
    const name = scheme[1]!.toLowerCase();
    if (name === 'http') protocol = 'http';
    else if (name !== 'socks5') throw invalid(`scheme ${name}:// is not supported (use socks5:// or http://; https:// proxies are not supported)`);
  }
  const authority = scheme ? address.slice(scheme[0].length).replace(/\/$/, '') : address;
  if (authority.includes('@')) throw invalid('credentials do not belong in the address: use username and password');
  if (/[/?#\s]/.test(authority)) throw invalid('address must be host:port (no path, query or spaces)');
  const match = /^(?:\[([0-9a-f:.]+)\]|([^:]+)):(\d{1,5})$/i.exec(authority);
  if (!match) throw invalid(`address ${JSON.stringify(address)} must be host:port (IPv6 as [address]:port), with a port`);
  const host = (match[1] ?? match[2]!).toLowerCase();
  const port = Number(match[3]);
  if (port < 1 || port > 65535) throw invalid(`port ${match[3]} is out of range (1-65535)`);
  if (match[1] !== undefined ? !net.isIPv6(host) : !(net.isIPv4(host) || HOSTNAME.test(host))) throw invalid(`${JSON.stringify(host)} is not a host name or IP address`);
  const username = credential(fields.username, 'username');
  const password = credential(fields.password, 'password');
  if (password !== undefined && username === undefined) throw invalid('password is only valid together with username');
  if (username === '') throw invalid('username must not be empty');
  if (protocol === 'http' && username?.includes(':')) throw invalid('an HTTP proxy username cannot contain ":" (Basic authentication)');
  return { address, protocol, host: host.replace(/\.$/, ''), port, ...(username !== undefined ? { username } : {}), ...(password !== undefined ? { password } : {}) };
}

/** What getInfo shows: the address and username, never the password. */
export function egressProxyView(stored: StoredEgressProxy | undefined): { address: string; username?: string } | undefined {
  if (!stored) return undefined;
  return { address: stored.address, ...(stored.username !== undefined ? { username: stored.username } : {}) };
}

/** The dialer's view of a stored proxy, the password opened with `open`. */
export function upstreamOf(stored: StoredEgressProxy, open: (sealed: string) => string): EgressUpstream {
  return {
    protocol: stored.protocol,
    host: stored.host,
    port: stored.port,
    ...(stored.username !== undefined ? { username: stored.username } : {}),
    ...(stored.sealedPassword !== undefined ? { password: open(stored.sealedPassword) } : {}),
  };
}
