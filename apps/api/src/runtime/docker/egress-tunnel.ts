import net from 'node:net';
import type { Logger } from 'pino';
import { deniedDestination, domainAllowed, httpHost, peekName, tlsServerName } from './egress-proxy.ts';
import { dialThroughUpstream, type EgressUpstream, type UpstreamTarget } from './egress-upstream.ts';
import { ConntrackReader, type TrackedDestination } from './original-destination.ts';
import type { UpstreamAddressPolicy } from './upstream-address.ts';

/** What the tunnel needs to know about one sandbox whose egress goes through its own proxy. */
export interface TunnelRoute {
  sandboxId: string;
  upstream: EgressUpstream;
  /** The sandbox's egress rules (IPv4 CIDRs; allowed beat denied) and allowed domain patterns. */
  allow: string[];
  deny: string[];
  domains: string[];
}

/** Largest request head / ClientHello read for a name on 80/443, and how long the sandbox may take to send it. */
const PEEK_TIMEOUT_MS = 10_000;
/** Connect plus proxy handshake. */
export const UPSTREAM_DEADLINE_MS = 10_000;
/** At most one sandbox-log event per sandbox in this interval (a failing proxy must not flood the store). */
const EVENT_INTERVAL_MS = 10_000;
/**
 * Connections of one sandbox still being set up (conntrack lookup, name peek, proxy handshake): more are closed at
 * once, so a sandbox opening connections in a loop against a silent proxy holds bounded memory and table reads.
 */
export const MAX_PENDING_PER_SANDBOX = 128;

function blockList(cidrs: string[]): net.BlockList {
  const list = new net.BlockList();
  for (const cidr of cidrs) {
    const [address, bits] = cidr.split('/');
    if (net.isIPv4(address!)) list.addSubnet(address!, Number(bits ?? 32), 'ipv4');
  }
  return list;
}

/**
 * The sandbox's rules first, as for direct traffic: an allowed domain (known from Host on 80 / SNI on 443) goes
 * by name; otherwise the original address decides — always-denied ranges never, an allowed CIDR yes, a denied one
 * no, anything else yes. The name is handed to the proxy (remote DNS) when it is an allowed domain, or when the
 * sandbox denies nothing (it could reach that name directly anyway); else the proxy is asked for the address.
 */
export function tunnelDecision(route: Pick<TunnelRoute, 'allow' | 'deny' | 'domains'>, destination: TrackedDestination, name: string | undefined): { target: UpstreamTarget } | { refused: string } {
  if (name && route.domains.length > 0 && domainAllowed(name, route.domains)) return { target: { host: name.toLowerCase().replace(/\.$/, ''), port: destination.port } };
  const address = destination.address;
  if (deniedDestination(address)) return { refused: `${address} is in an always-denied range` };
  const allowed = net.isIPv4(address) && blockList(route.allow).check(address, 'ipv4');
  if (!allowed && net.isIPv4(address) && blockList(route.deny).check(address, 'ipv4')) return { refused: `${address} is denied by the sandbox's rules` };
  const byName = name !== undefined && route.deny.length === 0 && /^[a-z0-9.-]+$/i.test(name);
  return { target: { host: byName ? name!.toLowerCase().replace(/\.$/, '') : address, port: destination.port } };
}

export interface EgressTunnelOptions {
  addresses: UpstreamAddressPolicy;
  /** Told (rate-limited) when a sandbox's connection could not go through its proxy: for the sandbox's logs. */
  onFailure?: (sandboxId: string, message: string) => void;
  deadlineMs?: number;
  /** Where the original destination of a redirected connection is looked up (the kernel's conntrack table). */
  lookup?: (peerAddress: string, peerPort: number, localPort: number) => Promise<TrackedDestination | undefined>;
}

/**
 * All TCP of sandboxes with `network.egressProxy` is redirected here (one port on the bridge gateway). For each
 * connection the tunnel finds where it was going, applies the sandbox's rules, and dials the destination through
 * the sandbox's proxy (SOCKS5 or HTTP CONNECT). It fails closed: a refused, failing, lying or silent proxy closes
 * the sandbox's connection (within the deadline) and never falls back to a direct connection.
 */
export class EgressTunnel {
  private server: net.Server | undefined;
  private readonly routes = new Map<string, TunnelRoute>();
  private readonly lastEvent = new Map<string, number>();
  private readonly pending = new Map<string, number>();
  private readonly lookup: NonNullable<EgressTunnelOptions['lookup']>;

  constructor(
    private readonly logger: Logger,
    private readonly options: EgressTunnelOptions,
  ) {
    const conntrack = new ConntrackReader();
    this.lookup = options.lookup ?? ((peer, port, local) => conntrack.lookup(peer, port, local));
  }

  /** The sandbox at `address` tunnels through `route`; undefined: it no longer does. */
  setRoute(address: string, route: TunnelRoute | undefined): void {
    if (route) this.routes.set(address, route);
    else this.routes.delete(address);
  }

  routeOf(address: string): TunnelRoute | undefined {
    return this.routes.get(address);
  }

  /** The sandbox's container is gone: its address may go to another one. */
  dropSandbox(sandboxId: string): void {
    for (const [address, route] of this.routes) if (route.sandboxId === sandboxId) this.routes.delete(address);
    this.lastEvent.delete(sandboxId);
  }

  async listen(address: string): Promise<number> {
    const server = net.createServer((socket) => this.handle(socket));
    server.on('error', (error) => this.logger.warn({ err: error }, 'egress tunnel listener error'));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, address, () => resolve()));
    server.unref();
    this.server = server;
    return (server.address() as net.AddressInfo).port;
  }

  close(): void {
    this.server?.close();
  }

  private handle(socket: net.Socket): void {
    socket.on('error', () => socket.destroy());
    const peer = socket.remoteAddress?.replace(/^::ffff:/, '') ?? '';
    const route = this.routes.get(peer);
    if (!route) {
      socket.destroy();
      return;
    }
    const pending = this.pending.get(route.sandboxId) ?? 0;
    if (pending >= MAX_PENDING_PER_SANDBOX) {
      this.fail(route, socket, `more than ${MAX_PENDING_PER_SANDBOX} egress connections are waiting for the sandbox's proxy; closing new ones`);
      return;
    }
    this.pending.set(route.sandboxId, pending + 1);
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      const left = (this.pending.get(route.sandboxId) ?? 1) - 1;
      if (left > 0) this.pending.set(route.sandboxId, left);
      else this.pending.delete(route.sandboxId);
    };
    socket.once('close', settle);
    socket.pause();
    socket.setTimeout(PEEK_TIMEOUT_MS, () => socket.destroy());
    void this.lookup(peer, socket.remotePort ?? 0, socket.localPort ?? 0).then(
      (destination) => {
        if (!destination) {
          this.fail(route, socket, 'the original destination of a redirected connection is unknown (no conntrack entry)');
          return;
        }
        if (destination.port === 80 || destination.port === 443) this.peekName(socket, destination, route, settle);
        else void this.forward(socket, Buffer.alloc(0), destination, undefined, route, settle);
      },
      (error: unknown) => this.fail(route, socket, `the conntrack table cannot be read: ${error instanceof Error ? error.message : String(error)}`),
    );
  }

  private peekName(socket: net.Socket, destination: TrackedDestination, route: TunnelRoute, established: () => void): void {
    const nameOf = destination.port === 80 ? httpHost : tlsServerName;
    peekName(socket, nameOf, (head, name) => void this.forward(socket, head, destination, name, route, established));
    socket.resume();
  }

  /** `established` is called once the tunnel carries data (the connection no longer counts as pending). */
  private async forward(socket: net.Socket, head: Buffer, destination: TrackedDestination, name: string | undefined, route: TunnelRoute, established: () => void): Promise<void> {
    const log = this.logger.child({ sandboxId: route.sandboxId, destination: `${destination.address}:${destination.port}`, name });
    const decision = tunnelDecision(route, destination, name);
    if ('refused' in decision) {
      log.debug({ reason: decision.refused }, 'egress connection refused');
      socket.destroy();
      return;
    }
    const { upstream } = route;
    // The dial has its own deadline: the sandbox's read timeout would otherwise race it and hide the failure.
    socket.setTimeout(0);
    // The sandbox gave up: so does the dial (no background dials piling up behind closed connections).
    const abandoned = new AbortController();
    socket.once('close', () => abandoned.abort());
    try {
      const address = await this.options.addresses.resolve(upstream.host, upstream.port);
      if (socket.destroyed) return;
      const { socket: tunnel, early } = await dialThroughUpstream(upstream, decision.target, { address, deadlineMs: this.options.deadlineMs ?? UPSTREAM_DEADLINE_MS, signal: abandoned.signal });
      if (socket.destroyed) {
        tunnel.destroy();
        return;
      }
      tunnel.on('error', () => socket.destroy());
      socket.on('close', () => tunnel.destroy());
      tunnel.on('close', () => socket.destroy());
      if (head.length > 0) tunnel.write(head);
      if (early.length > 0) socket.write(early);
      socket.pipe(tunnel);
      tunnel.pipe(socket);
      socket.resume();
      tunnel.resume();
      established();
      log.debug({ target: `${decision.target.host}:${decision.target.port}`, via: upstream.protocol }, 'egress connection tunnelled through the sandbox proxy');
    } catch (error) {
      if (abandoned.signal.aborted) return;
      this.fail(route, socket, `egress to ${decision.target.host}:${decision.target.port} through the ${upstream.protocol} proxy ${upstream.host}:${upstream.port} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Closes the sandbox's connection; a warn line and a sandbox event at most once per interval (debug otherwise). */
  private fail(route: TunnelRoute, socket: net.Socket, message: string): void {
    socket.destroy();
    const now = Date.now();
    if (now - (this.lastEvent.get(route.sandboxId) ?? 0) < EVENT_INTERVAL_MS) {
      this.logger.debug({ sandboxId: route.sandboxId }, message);
      return;
    }
    this.lastEvent.set(route.sandboxId, now);
    this.logger.warn({ sandboxId: route.sandboxId }, message);
    this.options.onFailure?.(route.sandboxId, message);
  }
}
