import http, { type ClientRequest, type IncomingMessage, STATUS_CODES } from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS, DIAL_RETRY_DELAYS_MS, DialTimeoutError } from './dial-policy.ts';
import { type UpstreamTarget, upstreamRequest } from './http-forwarder.ts';
import { upstreamHeadProblem } from './message-checks.ts';
import {
  classifyUpstreamError,
  proxyErrors,
  UpstreamIdleTimeout,
  upstreamFailureReply,
  writeProxyErrorToSocket,
} from './proxy-errors.ts';
import { stripHopByHop } from './upstream-headers.ts';

export interface UpgradeForwardOptions {
  /** Request headers for the upstream, `Connection`/`Upgrade` included (flat raw list). */
  headers: string[];
  stillRoutable: () => boolean;
  logger: Logger;
  /** Called with the upstream socket once piping starts, so the proxy can cut it on shutdown. */
  track?: (socket: net.Socket) => void;
  retryDelaysMs?: readonly number[];
  /** Either side of the tunnel idle for this long closes it (0: never). */
  idleTimeoutMs?: number;
}

function responseHead(status: number, message: string | undefined, raw: readonly string[]): Buffer {
  let head = `HTTP/1.1 ${status} ${message || STATUS_CODES[status] || ''}\r\n`;
  for (let i = 0; i + 1 < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/**
 * Forwards an upgrade request (WebSocket or otherwise). The request goes upstream through Node's HTTP client, so the
 * answer is parsed and checked: only a well-formed 101 that names the protocol turns the connection into a raw
 * two-way tunnel; any other answer is relayed as an ordinary response (then the connection is closed), and
 * anything unparseable becomes a 502.
 */
export function forwardUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: UpstreamTarget,
  options: UpgradeForwardOptions,
): void {
  const delays = options.retryDelaysMs ?? DIAL_RETRY_DELAYS_MS;
  const idleTimeoutMs = options.idleTimeoutMs ?? 0;
  const log = { sandboxId: target.sandboxId, port: target.port };
  let attempt = 0;
  let settled = false;
  let current: ClientRequest | undefined;
  client.on('error', () => client.destroy());
  client.once('close', () => {
    if (!settled) current?.destroy();
  });
  const clientSocket = client as net.Socket;
  if (idleTimeoutMs > 0 && typeof clientSocket.setTimeout === 'function') {
    clientSocket.setTimeout(idleTimeoutMs, () => {
      // While the sandbox has not answered, the upstream idle timeout decides (and answers 502).
      if (!settled) return;
      options.logger.info(log, 'proxy tunnel client idle, closing');
      client.destroy();
    });
  }

  const refuse = (reply = proxyErrors.portNotOpen(target.sandboxId, target.port)): void => {
    settled = true;
    if (!client.destroyed) writeProxyErrorToSocket(client, req.headers, reply);
  };

  const tunnel = (upstreamRes: IncomingMessage, upstream: net.Socket, upstreamHead: Buffer): void => {
    settled = true;
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    options.track?.(upstream);
    // Through a node's dial the stream may be no TCP socket (no Nagle or idle timer of its own).
    upstream.setNoDelay?.(true);
    if (idleTimeoutMs > 0) upstream.setTimeout?.(idleTimeoutMs, () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.write(responseHead(101, upstreamRes.statusMessage, upstreamRes.rawHeaders));
    if (upstreamHead.length > 0) client.write(upstreamHead);
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  };

  /** A non-101 answer: relayed with `connection: close`, body as it comes, then the connection ends. */
  const relay = (upstreamRes: IncomingMessage, upstream: ClientRequest): void => {
    settled = true;
    const raw = stripHopByHop(upstreamRes.rawHeaders);
    client.write(responseHead(upstreamRes.statusCode!, upstreamRes.statusMessage, [...raw, 'Connection', 'close']));
    upstreamRes.on('error', () => client.destroy());
    upstreamRes.on('end', () => client.end());
    upstreamRes.pipe(client, { end: false });
    client.once('close', () => upstream.destroy());
  };

  const dial = (): void => {
    const upstream = upstreamRequest(target, {
      host: target.address,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: options.headers,
      agent: false,
      setHost: false,
    });
    current = upstream;
    let connected = false;
    // A node's dial has deadlines of its own and waits out an agent restarting: only direct connects are timed here.
    const timer = target.dial
      ? undefined
      : setTimeout(() => {
          if (!connected) upstream.destroy(new DialTimeoutError(target.address, target.port));
        }, CONNECT_TIMEOUT_MS);
    upstream.once('socket', (socket: net.Socket) => {
      const onConnected = (): void => {
        connected = true;
        clearTimeout(timer);
        if (idleTimeoutMs > 0) upstream.setTimeout(idleTimeoutMs, () => upstream.destroy(new UpstreamIdleTimeout('upstream idle')));
      };
      // A stream from a node's dial is connected already.
      if (socket.connecting) socket.once('connect', onConnected);
      else onConnected();
    });
    upstream.end();

    upstream.once('upgrade', (upstreamRes: IncomingMessage, socket: net.Socket, upstreamHead: Buffer) => {
      const problem =
        upstreamHeadProblem(upstreamRes.statusCode, upstreamRes.statusMessage, upstreamRes.rawHeaders, true) ??
        (upstreamRes.headers.upgrade ? undefined : '101 without an upgrade header');
      if (problem) {
        socket.destroy();
        options.logger.warn({ ...log, err: problem }, 'sandbox answered an invalid upgrade response');
        refuse(proxyErrors.invalidUpstreamResponse(target.sandboxId, target.port));
        return;
      }
      tunnel(upstreamRes, socket, upstreamHead);
    });

    upstream.once('response', (upstreamRes: IncomingMessage) => {
      const problem = upstreamHeadProblem(upstreamRes.statusCode, upstreamRes.statusMessage, upstreamRes.rawHeaders);
      if (problem || client.destroyed) {
        upstreamRes.resume();
        upstream.destroy();
        if (problem) {
          options.logger.warn({ ...log, err: problem }, 'sandbox answered an invalid HTTP response');
          refuse(proxyErrors.invalidUpstreamResponse(target.sandboxId, target.port));
        }
        return;
      }
      relay(upstreamRes, upstream);
    });

    upstream.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (settled || client.destroyed) return;
      const failure = classifyUpstreamError(err);
      if (failure === 'unreachable' && !connected && attempt < delays.length) {
        const delay = delays[attempt]!;
        attempt += 1;
        setTimeout(() => {
          if (client.destroyed) return;
          if (!options.stillRoutable()) {
            refuse(proxyErrors.sandboxNotFound(target.sandboxId));
            return;
          }
          dial();
        }, delay);
        return;
      }
      const level = failure === 'unreachable' ? 'debug' : 'warn';
      options.logger[level]({ ...log, failure, err: err.message }, 'proxy upgrade failed');
      refuse(upstreamFailureReply(failure, target.sandboxId, target.port));
    });
  };

  dial();
}
