import { createConnection, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { EnvdContext } from '../context.ts';
import { loopbackOnlyPorts, readListeningSockets } from './listening-sockets.ts';

const SCAN_INTERVAL_MS = 1_000;

function externalAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((info) => info !== undefined && info.family === 'IPv4' && !info.internal)
    .map((info) => info!.address);
}

/**
 * Makes services that listen only on localhost reachable from outside the sandbox: for each such
 * port, listens on the sandbox's external addresses at the same port and pipes to localhost.
 */
export function startLocalPortForwarder(ctx: EnvdContext): { stop(): void } {
  const forwarders = new Map<number, Server[]>();
  const log = ctx.logger.child({ component: 'port-forwarder' });
  let stopped = false;

  const open = (port: number): void => {
    const servers = externalAddresses().map((address) => {
      const server = createServer((client) => {
        const upstream = createConnection({ host: '127.0.0.1', port });
        client.pipe(upstream).pipe(client);
        const close = (): void => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', close);
        upstream.on('error', close);
      });
      server.on('error', (error) => log.debug({ port, address, err: error }, 'forwarder listen failed'));
      server.listen({ port, host: address });
      return server;
    });
    forwarders.set(port, servers);
    log.info({ port }, 'forwarding localhost-only port');
  };

  const close = (port: number): void => {
    for (const server of forwarders.get(port) ?? []) server.close();
    forwarders.delete(port);
    log.info({ port }, 'stopped forwarding port');
  };

  const scan = async (): Promise<void> => {
    const wanted = new Set(loopbackOnlyPorts(await readListeningSockets()).filter((port) => port !== ctx.config.port));
    if (stopped) return;
    for (const port of wanted) if (!forwarders.has(port)) open(port);
    for (const port of [...forwarders.keys()]) if (!wanted.has(port)) close(port);
  };

  const timer = setInterval(() => {
    scan().catch((error: unknown) => log.warn({ err: error }, 'port scan failed'));
  }, SCAN_INTERVAL_MS);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      for (const port of [...forwarders.keys()]) close(port);
    },
  };
}
