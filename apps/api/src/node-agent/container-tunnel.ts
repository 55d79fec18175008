/**
 * The agent's `CONNECT <address>:<port>` tunnel: a TCP stream to a port of one of this node's sandbox containers
 * (proxy traffic, the API's envd calls). Only addresses of containers the node's runtime manages are dialled;
 * anything else (the node itself, its engine, other hosts) is refused with 403 before any connection is made.
 * Served over HTTP/1.1 (the CONNECT takes the whole TLS connection) and over HTTP/2 (each tunnel one stream of a
 * connection the API keeps open: no TLS handshake per tunnel).
 */
import { connect, isIPv4, type Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { ServerHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ManagedAddresses } from './managed-addresses.ts';

const DIAL_TIMEOUT_MS = 10_000;

/** `address:port` of a CONNECT target, or undefined when it is not an IPv4 literal and a port 1-65535. */
export function parseTunnelTarget(target: string | undefined): { address: string; port: number } | undefined {
  const match = /^([0-9.]{7,15}):([0-9]{1,5})$/.exec(target ?? '');
  if (!match || !isIPv4(match[1])) return undefined;
  const port = Number(match[2]);
  return port >= 1 && port <= 65535 ? { address: match[1], port } : undefined;
}

/** How one transport answers a tunnel request. */
interface TunnelReply {
  refuse(status: number, message: string): void;
  /** The dial succeeded: say so and join the two streams. */
  accept(upstream: Socket): void;
  /** The client's side went away. */
  onGone(listener: () => void): void;
}

function openTunnel(rawTarget: string | undefined, managed: ManagedAddresses, logger: Logger, reply: TunnelReply): void {
  const target = parseTunnelTarget(rawTarget);
  if (!target) {
    reply.refuse(400, `CONNECT target must be <IPv4 address>:<port 1-65535>, got ${JSON.stringify((rawTarget ?? '').slice(0, 80))}`);
    return;
  }
  void managed.has(target.address).then(
    (known) => {
      if (!known) {
        logger.warn({ target: `${target.address}:${target.port}` }, 'tunnel refused: not a managed container address');
        reply.refuse(403, `${target.address} is not the address of a sandbox container on this node`);
        return;
      }
      const upstream: Socket = connect({ host: target.address, port: target.port, timeout: DIAL_TIMEOUT_MS });
      const dialFailed = (error: Error): void => {
        reply.refuse(502, `dial ${target.address}:${target.port} failed: ${error.message}`);
        upstream.destroy();
      };
      upstream.once('error', dialFailed);
      upstream.once('timeout', () => dialFailed(new Error(`no connection within ${DIAL_TIMEOUT_MS} ms`)));
      upstream.once('connect', () => {
        upstream.off('error', dialFailed);
        upstream.setTimeout(0);
        upstream.setNoDelay(true);
        reply.accept(upstream);
      });
      reply.onGone(() => {
        if (upstream.connecting) upstream.destroy();
      });
    },
    (error: unknown) => reply.refuse(503, `cannot list this node's containers: ${error instanceof Error ? error.message : String(error)}`),
  );
}

function joinStreams(client: Duplex, upstream: Socket): void {
  upstream.on('error', () => client.destroy());
  client.on('error', () => upstream.destroy());
  upstream.pipe(client);
  client.pipe(upstream);
  client.on('close', () => upstream.destroy());
  upstream.on('close', () => client.destroy());
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 502: 'Bad Gateway', 503: 'Service Unavailable' };

/** HTTP/1.1 CONNECT: the TLS connection becomes the tunnel. */
export function handleTunnel(request: IncomingMessage, clientSocket: Duplex, head: Buffer, managed: ManagedAddresses, logger: Logger): void {
  clientSocket.on('error', () => undefined);
  openTunnel(request.url, managed, logger, {
    refuse(status, message) {
      if (!clientSocket.writable) return;
      const body = JSON.stringify({ error: { code: 'tunnel_refused', message } });
      clientSocket.end(`HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    },
    accept(upstream) {
      clientSocket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      joinStreams(clientSocket, upstream);
    },
    onGone(listener) {
      clientSocket.once('close', listener);
    },
  });
}

/** HTTP/2 CONNECT (`:authority` = the target): this stream becomes the tunnel; the connection stays shared. */
export function handleStreamTunnel(stream: ServerHttp2Stream, authority: string | undefined, managed: ManagedAddresses, logger: Logger): void {
  stream.on('error', () => undefined);
  openTunnel(authority, managed, logger, {
    refuse(status, message) {
      if (stream.destroyed || stream.headersSent) {
        stream.destroy();
        return;
      }
      stream.respond({ ':status': status, 'content-type': 'application/json' });
      stream.end(JSON.stringify({ error: { code: 'tunnel_refused', message } }));
    },
    accept(upstream) {
      if (stream.destroyed) {
        upstream.destroy();
        return;
      }
      stream.respond({ ':status': 200 });
      joinStreams(stream, upstream);
    },
    onGone(listener) {
      stream.once('close', listener);
    },
  });
}
