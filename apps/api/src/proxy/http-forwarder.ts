import http, { type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS, DIAL_RETRY_DELAYS_MS, DialTimeoutError } from './dial-policy.ts';
import { proxyErrors, sendProxyError } from './proxy-errors.ts';
import { stripHopByHop } from './upstream-headers.ts';

export interface UpstreamTarget {
  sandboxId: string;
  address: string;
  port: number;
}

export interface HttpForwardOptions {
  agent: http.Agent;
  /** Request headers for the upstream, already filtered and masked (flat raw list). */
  headers: string[];
  /** Checked before each retry: false turns the answer into "sandbox not found". */
  stillRoutable: () => boolean;
  logger: Logger;
  retryDelaysMs?: readonly number[];
}

/** A request without a body can be replayed safely when a pooled connection turns out to be dead. */
function hasRequestBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * Forwards one HTTP request to the sandbox and streams both bodies through without buffering. The request body is
 * only consumed once the upstream connection exists, so refused dials can be retried without losing it.
 */
export function forwardHttp(
  req: IncomingMessage,
  res: ServerResponse,
  target: UpstreamTarget,
  options: HttpForwardOptions,
): void {
  const delays = options.retryDelaysMs ?? DIAL_RETRY_DELAYS_MS;
  const withBody = hasRequestBody(req);
  let attempt = 0;
  let responded = false;
  let current: ClientRequest | undefined;

  res.once('close', () => {
    // Client went away (or we finished): make sure the upstream exchange does not linger.
    if (!res.writableFinished) current?.destroy();
  });

  const fail = (reply = proxyErrors.portNotOpen(target.sandboxId, target.port)): void => {
    if (!res.destroyed) sendProxyError(res, req.headers, reply);
  };

  const start = (): void => {
    const upstream = http.request({
      host: target.address,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: options.headers,
      agent: options.agent,
      setHost: false,
    });
    current = upstream;
    let connected = false;
    const timer = setTimeout(() => {
      if (!connected) upstream.destroy(new DialTimeoutError(target.address, target.port));
    }, CONNECT_TIMEOUT_MS);

    const onConnected = (): void => {
      connected = true;
      clearTimeout(timer);
      if (withBody) req.pipe(upstream);
    };
    upstream.once('socket', (socket) => {
      socket.setNoDelay(true);
      if (socket.connecting) socket.once('connect', onConnected);
      else onConnected();
    });
    if (!withBody) upstream.end();

    upstream.once('response', (upstreamRes) => {
      responded = true;
      const raw = stripHopByHop(upstreamRes.rawHeaders);
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage || undefined, raw);
      // Streams (Connect server streams, downloads of unknown length) should show their headers right away.
      if (upstreamRes.headers['content-length'] === undefined) res.flushHeaders();
      pipeline(upstreamRes, res, (err) => {
        if (err) {
          upstream.destroy();
          res.destroy();
          return;
        }
        if (!req.complete) {
          // Answered before the upload ended (e.g. an early 4xx): drop the rest of the body like Node's own
          // server does, so the client connection stays usable and the server can close it when idle.
          req.unpipe(upstream);
          upstream.destroy();
          req.resume();
        }
      });
    });

    upstream.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (responded) {
        res.destroy();
        return;
      }
      if (res.destroyed || res.headersSent) return;
      // Refused/unreachable dial, or a pooled keep-alive connection the upstream had already closed.
      const retryable = !connected || (upstream.reusedSocket && !withBody);
      if (retryable && attempt < delays.length) {
        const delay = !connected ? delays[attempt]! : 0;
        attempt += 1;
        setTimeout(() => {
          if (res.destroyed) return;
          if (!options.stillRoutable()) {
            fail(proxyErrors.sandboxNotFound(target.sandboxId));
            return;
          }
          start();
        }, delay);
        return;
      }
      options.logger.debug({ sandboxId: target.sandboxId, port: target.port, err: err.message }, 'proxy upstream failed');
      fail();
    });
  };

  start();
}
