/**
 * The agent's `CONNECT <address>:<port>` tunnel: a TCP stream to a port of one of this node's sandbox containers
 * (proxy traffic, the API's envd calls). Only addresses of containers the node's runtime manages are dialled;
 * anything else (the node itself, its engine, other hosts) is refused with 403 before any connection is made.
 */
import { connect, isIPv4, type Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ManagedAddresses } from './managed-addresses.ts';

const DIAL_TIMEOUT_MS = 10_000;

function refuse(socket: Duplex, status: number, reason: string, message: string): void {
  const body = JSON.stringify({ error: { code: 'tunnel_refused', message } });
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** `address:port` of a CONNECT target, or undefined when it is not an IPv4 literal and a port 1-65535. */
export function parseTunnelTarget(target: string | undefined): { address: string; port: number } | undefined {
  const match = /^([0-9.]{7,15}):([0-9]{1,5})$/.exec(target ?? '');
  if (!match || !isIPv4(match[1])) return undefined;
  const port = Number(match[2]);
  return port >= 1 && port <= 65535 ? { address: match[1], port } : undefined;
}

export function handleTunnel(request: IncomingMessage, clientSocket: Duplex, head: Buffer, managed: ManagedAddresses, logger: Logger): void {
  clientSocket.on('error', () => undefined);
  const target = parseTunnelTarget(request.url);
  if (!target) {
    refuse(clientSocket, 400, 'Bad Request', `CONNECT target must be <IPv4 address>:<port 1-65535>, got ${JSON.stringify((request.url ?? '').slice(0, 80))}`);
    return;
  }
  void managed.has(target.address).then(
    (known) => {
      if (!known) {
        logger.warn({ target: `${target.address}:${target.port}` }, 'tunnel refused: not a managed container address');
        refuse(clientSocket, 403, 'Forbidden', `${target.address} is not the address of a sandbox container on this node`);
        return;
      }
      const upstream: Socket = connect({ host: target.address, port: target.port, timeout: DIAL_TIMEOUT_MS });
      const dialFailed = (error: Error): void => {
        if (clientSocket.writable) refuse(clientSocket, 502, 'Bad Gateway', `dial ${target.address}:${target.port} failed: ${error.message}`);
        upstream.destroy();
      };
      upstream.once('error', dialFailed);
      upstream.once('timeout', () => dialFailed(new Error(`no connection within ${DIAL_TIMEOUT_MS} ms`)));
      upstream.once('connect', () => {
        upstream.off('error', dialFailed);
        upstream.setTimeout(0);
        upstream.setNoDelay(true);
        upstream.on('error', () => clientSocket.destroy());
        clientSocket.on('error', () => upstream.destroy());
        clientSocket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(clientSocket);
        clientSocket.pipe(upstream);
        clientSocket.on('close', () => upstream.destroy());
        upstream.on('close', () => clientSocket.destroy());
      });
      clientSocket.once('close', () => {
        if (upstream.connecting) upstream.destroy();
      });
    },
    (error: unknown) => refuse(clientSocket, 503, 'Service Unavailable', `cannot list this node's containers: ${error instanceof Error ? error.message : String(error)}`),
  );
}
