import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { EnvdContext } from '../context.ts';
import { type LoopbackPort, loopbackOnlyPorts, processesBesides, readListeningSockets } from './listening-sockets.ts';

const SCAN_INTERVAL_MS = 1_000;

export interface PortForwarderOptions {
  /** How often /proc/net/tcp{,6} is scanned; 1 s like the reference agent. */
  intervalMs?: number;
  /** Addresses to listen on; the container's non-loopback IPv4 addresses by default. */
  addresses?: () => string[];
}

export function externalIpv4Addresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((info) => info !== undefined && info.family === 'IPv4' && !info.internal)
    .map((info) => info!.address);
}

interface Forwarding {
  host: string;
  servers: Server[];
  connections: Set<Socket>;
}

/**
 * Makes services that listen only on localhost reachable from outside the sandbox: for each such
 * port, listens on the sandbox's external addresses at the same port and pipes to localhost.
 */
export function startLocalPortForwarder(ctx: EnvdContext, options: PortForwarderOptions = {}): { stop(): void } {
  const forwardings = new Map<number, Forwarding>();
  const log = ctx.logger.child({ component: 'port-forwarder' });
  const addresses = options.addresses ?? externalIpv4Addresses;
  let stopped = false;
  let scanning = false;

  const open = ({ port, host }: LoopbackPort): void => {
    const forwarding: Forwarding = { host, servers: [], connections: new Set() };
    for (const address of addresses()) {
      const server = createServer((client) => {
        const upstream = createConnection({ host, port });
        forwarding.connections.add(client).add(upstream);
        const close = (): void => {
          client.destroy();
          upstream.destroy();
          forwarding.connections.delete(client);
          forwarding.connections.delete(upstream);
        };
        client.on('error', close).on('close', close);
        upstream.on('error', close).on('close', close);
        client.pipe(upstream).pipe(client);
      });
      // Something else may own the port on that address already; then there is nothing to do.
      server.on('error', (error) => log.debug({ port, address, err: error }, 'forwarder listen failed'));
      server.listen({ port, host: address });
      forwarding.servers.push(server);
    }
    forwardings.set(port, forwarding);
    log.info({ port, host }, 'forwarding localhost-only port');
  };

  const close = (port: number): void => {
    const forwarding = forwardings.get(port);
    if (!forwarding) return;
    for (const server of forwarding.servers) server.close();
    for (const socket of forwarding.connections) socket.destroy();
    forwardings.delete(port);
    log.info({ port }, 'stopped forwarding port');
  };

  const scan = async (): Promise<void> => {
    // Nothing but envd (and the init that started it) runs: no socket to forward, and /proc/net/tcp is not read.
    const sockets = processesBesides([process.pid, process.ppid]) ? await readListeningSockets() : [];
    const wanted = new Map(loopbackOnlyPorts(sockets).filter(({ port }) => port !== ctx.config.port).map((p) => [p.port, p]));
    if (stopped) return;
    for (const [port, target] of wanted) {
      const current = forwardings.get(port);
      if (current && current.host !== target.host) close(port);
      if (!forwardings.has(port)) open(target);
    }
    for (const port of [...forwardings.keys()]) if (!wanted.has(port)) close(port);
  };

  const tick = (): void => {
    if (scanning || stopped) return;
    scanning = true;
    scan()
      .catch((error: unknown) => log.warn({ err: error }, 'port scan failed'))
      .finally(() => {
        scanning = false;
      });
  };
  const timer = setInterval(tick, options.intervalMs ?? SCAN_INTERVAL_MS);
  timer.unref();
  tick();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      for (const port of [...forwardings.keys()]) close(port);
    },
  };
}
