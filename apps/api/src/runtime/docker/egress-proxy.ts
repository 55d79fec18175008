import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { Logger } from 'pino';
import type { EgressPolicy } from '../sandbox-runtime.ts';
import { CidrPolicy } from './egress-cidr-policy.ts';
import type { TrackedDestination } from './original-destination.ts';
import type { EgressTransforms } from './egress-transforms.ts';
import { ALWAYS_DENIED } from './sandbox-firewall.ts';

/** How the proxy turns a name into addresses; replaceable so tests can name their own stand-in hosts. */
export const egressNameResolver = {
  resolve: async (name: string): Promise<string[]> => (await lookup(name, { all: true, family: 4 })).map((a) => a.address),
};

/** Largest request head / ClientHello read before a decision. */
const MAX_PEEK = 16 * 1024;
const PEEK_TIMEOUT_MS = 10_000;

/**
 * Where the proxy never dials: the always-denied ranges and 0.0.0.0/8 ("this host": a connection to 0.0.0.0
 * reaches the host's own listeners).
 */
const denied = new net.BlockList();
for (const cidr of ['0.0.0.0/8', ...ALWAYS_DENIED]) {
  const [address, bits] = cidr.split('/');
  denied.addSubnet(address!, Number(bits), 'ipv4');
}
/** IPv6 global unicast: what is not in it (`::`, `::1`, v4-mapped `::ffff:…`, NAT64, link-local, ULA) is refused. */
const ipv6Global = new net.BlockList();
ipv6Global.addSubnet('2000::', 3, 'ipv6');

/** True when the proxy must not connect to `address` (not an IP address at all included). */
export function deniedDestination(address: string): boolean {
  if (net.isIPv4(address)) return denied.check(address, 'ipv4');
  if (net.isIPv6(address)) return !ipv6Global.check(address, 'ipv6');
  return true;
}

/** `example.com` matches itself only; `*.example.com` any name below it (not itself); `*` anything. */
export function domainAllowed(name: string, patterns: string[]): boolean {
  const host = name.toLowerCase().replace(/\.$/, '');
  return patterns.some((pattern) => pattern === '*' || (pattern.startsWith('*.') ? host.endsWith(pattern.slice(1)) : host === pattern));
}

/**
 * Reads the connection's first bytes until `nameOf` finds the name it carries (or finds there is none, or 16 KiB came
 * without one), then pauses the socket and hands over what was read: the bytes go on to the destination.
 */
export function peekName(socket: net.Socket, nameOf: (head: Buffer) => string | undefined | null, then: (head: Buffer, name: string | undefined) => void): void {
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    head = Buffer.concat([head, chunk]);
    const name = nameOf(head);
    if (name === null && head.length < MAX_PEEK) return;
    socket.off('data', onData);
    socket.pause();
    then(head, name ?? undefined);
  };
  socket.on('data', onData);
}

/** The Host header of an HTTP/1 request head; undefined until the head is complete (or without one). */
export function httpHost(head: Buffer): string | undefined | null {
  const text = head.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const match = /\r\nhost:[ \t]*([^\r\n]+)/i.exec(text.slice(0, end + 2));
  if (!match) return undefined;
  const host = match[1]!.trim();
  return host.startsWith('[') ? undefined : host.replace(/:\d+$/, '');
}

/** The SNI of a TLS ClientHello; null while incomplete, undefined when there is none (or it is not TLS). */
export function tlsServerName(data: Buffer): string | undefined | null {
  if (data.length < 5) return null;
  if (data[0] !== 0x16) return undefined;
  const recordEnd = 5 + data.readUInt16BE(3);
  if (data.length < recordEnd) return null;
  let at = 5;
  if (data[at] !== 0x01) return undefined;
  at += 4 + 2 + 32; // handshake header, version, random
  const skip = (lengthBytes: 1 | 2): boolean => {
    if (at + lengthBytes > recordEnd) return false;
    at += lengthBytes + (lengthBytes === 1 ? data[at]! : data.readUInt16BE(at));
    return at <= recordEnd;
  };
  if (!skip(1) || !skip(2) || !skip(1)) return undefined; // session id, cipher suites, compression
  if (at + 2 > recordEnd) return undefined;
  const extensionsEnd = Math.min(recordEnd, at + 2 + data.readUInt16BE(at));
  at += 2;
  while (at + 4 <= extensionsEnd) {
    const type = data.readUInt16BE(at);
    const length = data.readUInt16BE(at + 2);
    at += 4;
    if (type === 0 && at + 5 <= extensionsEnd && data[at + 2] === 0) {
      const nameLength = data.readUInt16BE(at + 3);
      return data.subarray(at + 5, at + 5 + nameLength).toString('ascii');
    }
    at += length;
  }
  return undefined;
}

export interface EgressProxyPorts {
  http: number;
  tls: number;
  /**
   * Where TCP 80/443 to a sandbox's allowed CIDRs goes when the sandbox has network.rules transforms (a rule for a
   * name applies whatever else is allowed): requests to a ruled name are transformed, every other connection is
   * relayed unchanged to where it was going. Absent when original destinations cannot be known (no conntrack).
   */
  allowedHttp?: number;
  allowedTls?: number;
}

/** Where a redirected connection (peer address and port, our local port) was going; undefined: unknown. */
export type OriginalDestinationLookup = (peerAddress: string, peerPort: number, localPort: number) => Promise<TrackedDestination | undefined>;

/**
 * Transparent proxy for sandbox TCP traffic to ports 80 and 443 when the sandbox allows domains: the
 * firewall redirects those connections here; the proxy reads the HTTP Host header or the TLS SNI, and when
 * the name is allowed for that sandbox it resolves and dials the name itself (so a sandbox cannot pick the
 * address by lying about it) unless it resolves into an always-denied range. Anything else is closed.
 */
export class EgressProxy {
  private readonly servers: net.Server[] = [];
  /** Allowed domain patterns by sandbox address. */
  private readonly domains = new Map<string, string[]>();
  /** Sandboxes whose 80/443 pass here only for network.rules transforms (no domain allowlist): their CIDR rules. */
  private readonly transformOnly = new Map<string, CidrPolicy>();
  /** The CIDR rules of every sandbox with transforms (for its connections to allowed CIDRs). */
  private readonly cidrs = new Map<string, CidrPolicy>();

  constructor(private readonly logger: Logger, private readonly transforms?: EgressTransforms) {}

  /** The sandbox's network.rules transforms (see egress-transforms.ts); its CIDR rules apply when it allows no domains. */
  setTransforms(address: string, sandboxId: string, policy: EgressPolicy): void {
    this.transforms?.set(address, sandboxId, policy.transforms);
    if (this.transforms?.has(address)) {
      this.transformOnly.set(address, new CidrPolicy(policy));
      this.cidrs.set(address, new CidrPolicy(policy));
    } else {
      this.transformOnly.delete(address);
      this.cidrs.delete(address);
    }
  }

  setDomains(address: string, patterns: string[] | undefined): void {
    if (patterns && patterns.length > 0) this.domains.set(address, patterns);
    else this.domains.delete(address);
  }

  /**
   * Listens on `address` (the bridge gateway, where REDIRECT delivers) on two free ports; with `original`, on two more
   * for connections to allowed CIDRs (see EgressProxyPorts).
   */
  async listen(address: string, original?: OriginalDestinationLookup): Promise<EgressProxyPorts> {
    const http = await this.server(address, 80, httpHost);
    const tls = await this.server(address, 443, tlsServerName);
    if (!original) return { http, tls };
    const allowedHttp = await this.listener(address, (socket) => this.handleAllowed(socket, 80, httpHost, original));
    const allowedTls = await this.listener(address, (socket) => this.handleAllowed(socket, 443, tlsServerName, original));
    return { http, tls, allowedHttp, allowedTls };
  }

  close(): void {
    for (const server of this.servers) server.close();
  }

  private server(address: string, upstreamPort: number, nameOf: (data: Buffer) => string | undefined | null): Promise<number> {
    return this.listener(address, (socket) => this.handle(socket, upstreamPort, nameOf));
  }

  private async listener(address: string, onConnection: (socket: net.Socket) => void): Promise<number> {
    const server = net.createServer(onConnection);
    server.on('error', (error) => this.logger.warn({ err: error }, 'egress proxy listener error'));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, address, () => resolve()));
    server.unref();
    this.servers.push(server);
    return (server.address() as net.AddressInfo).port;
  }

  private handle(socket: net.Socket, upstreamPort: number, nameOf: (data: Buffer) => string | undefined | null): void {
    const address = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    const patterns = this.domains.get(address) ?? (this.transformOnly.has(address) ? ['*'] : undefined);
    if (!patterns) {
      socket.destroy();
      return;
    }
    socket.setTimeout(PEEK_TIMEOUT_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    peekName(socket, nameOf, (head, name) => {
      void this.forward(socket, head, name, upstreamPort, patterns, this.domains.has(address) ? undefined : this.transformOnly.get(address));
    });
  }

  /**
   * A connection of a sandbox with transforms to one of its allowed CIDRs (which the firewall would have let through
   * directly): a request to a ruled name is transformed like any other (the name resolved here, never the address the
   * sandbox picked, so that a secret goes only where the name points); anything else goes on, unchanged, to where it
   * was going.
   */
  private handleAllowed(socket: net.Socket, port: number, nameOf: (data: Buffer) => string | undefined | null, original: OriginalDestinationLookup): void {
    const sandboxAddress = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    socket.setTimeout(PEEK_TIMEOUT_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    socket.pause();
    const log = this.logger.child({ sandboxAddress, port });
    original(sandboxAddress, socket.remotePort ?? 0, socket.localPort ?? 0).then(
      (destination) => {
        if (!destination || destination.port !== port || deniedDestination(destination.address)) {
          log.debug({ destination }, 'egress connection refused: its original destination is unknown or denied');
          socket.destroy();
          return;
        }
        peekName(socket, nameOf, (head, name) => {
          if (name && this.transforms?.covers(sandboxAddress, name)) {
            void this.forwardTransformed(socket, head, name, port, sandboxAddress);
            return;
          }
          pipeTo(socket, head, destination.address, port);
        });
        socket.resume();
      },
      (error: unknown) => {
        log.warn({ err: error }, 'egress connection refused: the conntrack table cannot be read');
        socket.destroy();
      },
    );
  }

  /** A ruled name reached through an allowed CIDR: dialled by name when the sandbox may reach what the name resolves to. */
  private async forwardTransformed(socket: net.Socket, head: Buffer, name: string, port: number, sandboxAddress: string): Promise<void> {
    const log = this.logger.child({ sandboxAddress, name, port });
    const domains = this.domains.get(sandboxAddress);
    const cidrs = this.cidrs.get(sandboxAddress);
    let addresses: string[];
    try {
      addresses = await egressNameResolver.resolve(name);
    } catch {
      socket.destroy();
      return;
    }
    // What a direct connection to those addresses would be allowed: by the name (domains), else by the CIDR rules.
    const permitted = addresses.length > 0 && !addresses.some(deniedDestination) && cidrs !== undefined
      && (domains ? domainAllowed(name, domains) || addresses.every((a) => cidrs.allowsExplicitly(a)) : addresses.every((a) => cidrs.allows(a)));
    if (!permitted) {
      log.debug({ addresses }, 'egress connection refused: the ruled name resolves to addresses the sandbox may not reach');
      socket.destroy();
      return;
    }
    if (this.transforms?.intercept({ socket, head, sandboxAddress, name, address: addresses[0]!, port, protocol: port === 443 ? 'tls' : 'http' })) {
      socket.setTimeout(0);
      return;
    }
    pipeTo(socket, head, addresses[0]!, port);
  }

  private async forward(socket: net.Socket, head: Buffer, name: string | undefined, port: number, patterns: string[], cidrs?: CidrPolicy): Promise<void> {
    const log = this.logger.child({ sandboxAddress: socket.remoteAddress, name, port });
    if (!name || !domainAllowed(name, patterns)) {
      log.debug('egress connection refused: name not allowed');
      socket.destroy();
      return;
    }
    let addresses: string[];
    try {
      addresses = await egressNameResolver.resolve(name);
    } catch {
      socket.destroy();
      return;
    }
    if (addresses.length === 0 || addresses.some(deniedDestination) || (cidrs && !addresses.every((a) => cidrs.allows(a)))) {
      log.debug({ addresses }, 'egress connection refused: name resolves into a denied range');
      socket.destroy();
      return;
    }
    const sandboxAddress = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    if (this.transforms?.intercept({ socket, head, sandboxAddress, name, address: addresses[0]!, port, protocol: port === 443 ? 'tls' : 'http' })) {
      socket.setTimeout(0);
      return;
    }
    pipeTo(socket, head, addresses[0]!, port);
  }
}

/** Dials `address:port`, sends what was already read, then pipes both ways; either side closing closes both. */
function pipeTo(socket: net.Socket, head: Buffer, address: string, port: number): void {
  const upstream = net.connect(port, address);
  upstream.on('error', () => socket.destroy());
  socket.on('error', () => upstream.destroy());
  upstream.once('connect', () => {
    socket.setTimeout(0);
    upstream.write(head);
    socket.pipe(upstream);
    upstream.pipe(socket);
    socket.resume();
  });
  socket.on('close', () => upstream.destroy());
  upstream.on('close', () => socket.destroy());
}
