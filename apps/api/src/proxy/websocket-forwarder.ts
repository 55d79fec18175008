import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS, DIAL_RETRY_DELAYS_MS } from './dial-policy.ts';
import type { UpstreamTarget } from './http-forwarder.ts';
import { proxyErrors, writeProxyErrorToSocket } from './proxy-errors.ts';

export interface UpgradeForwardOptions {
  /** Request headers for the upstream, `Connection`/`Upgrade` included (flat raw list). */
  headers: string[];
  stillRoutable: () => boolean;
  logger: Logger;
  /** Called with the upstream socket once piping starts, so the proxy can cut it on shutdown. */
  track?: (socket: net.Socket) => void;
  retryDelaysMs?: readonly number[];
}

function requestHead(req: IncomingMessage, headers: string[]): Buffer {
  let head = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/**
 * Forwards an upgrade request (WebSocket or otherwise) as raw TCP: the request head is replayed upstream and from
 * then on bytes flow both ways untouched, the 101 answer included.
 */
export function forwardUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: UpstreamTarget,
  options: UpgradeForwardOptions,
): void {
  const delays = options.retryDelaysMs ?? DIAL_RETRY_DELAYS_MS;
  let attempt = 0;
  let clientClosed = false;
  const onClientEarlyClose = (): void => {
    clientClosed = true;
  };
  client.once('close', onClientEarlyClose);
  client.on('error', () => client.destroy());

  const dial = (): void => {
    const upstream = net.connect({ host: target.address, port: target.port, noDelay: true });
    const timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
    upstream.once('error', (err) => {
      clearTimeout(timer);
      if (clientClosed) return;
      if (attempt < delays.length) {
        const delay = delays[attempt]!;
        attempt += 1;
        setTimeout(() => {
          if (clientClosed) return;
          if (!options.stillRoutable()) {
            writeProxyErrorToSocket(client, req.headers, proxyErrors.sandboxNotFound(target.sandboxId));
            return;
          }
          dial();
        }, delay);
        return;
      }
      options.logger.debug({ sandboxId: target.sandboxId, port: target.port, err: err.message }, 'proxy upgrade dial failed');
      writeProxyErrorToSocket(client, req.headers, proxyErrors.portNotOpen(target.sandboxId, target.port));
    });
    upstream.once('connect', () => {
      clearTimeout(timer);
      client.off('close', onClientEarlyClose);
      if (clientClosed) {
        upstream.destroy();
        return;
      }
      options.track?.(upstream);
      upstream.removeAllListeners('error');
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.write(requestHead(req, options.headers));
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
  };

  dial();
}
