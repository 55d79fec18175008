import http, { type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import type { Logger } from 'pino';
import { CONNECT_TIMEOUT_MS, DIAL_RETRY_DELAYS_MS, DialTimeoutError } from './dial-policy.ts';
import { DialPools } from './dial-pools.ts';
import { upstreamHeadProblem } from './message-checks.ts';
import {
  classifyUpstreamError,
  InvalidUpstreamResponse,
  proxyErrors,
  sendProxyError,
  UpstreamIdleTimeout,
  upstreamFailureReply,
} from './proxy-errors.ts';
import { stripHopByHop } from './upstream-headers.ts';

export interface UpstreamTarget {
  sandboxId: string;
  address: string;
  port: number;
  /** The sandbox service speaks TLS on this port (`network.httpsPorts`): dialled over HTTPS, certificate not verified. */
  tls: boolean;
  /** Opens the TCP stream through the sandbox's node (a node of another machine); none: a direct connect. */
  dial?: (address: string, port: number) => Promise<Duplex>;
}

/**
 * `http.request` or `https.request` for the target; a self-signed certificate in the sandbox is accepted. Through a
 * node's dial the stream is that node's, TLS on top of it when the port speaks TLS: pooled when `options.agent` is
 * the node's keep-alive pool (dial-pools.ts), else one dial per exchange (upgrades).
 */
export function upstreamRequest(target: UpstreamTarget, options: http.RequestOptions): ClientRequest {
  const { dial } = target;
  if (dial && DialPools.owns(options.agent)) return http.request(options);
  if (dial) {
    const createConnection = (_options: unknown, done: (error: Error | null, stream?: Duplex) => void): undefined => {
      dial(target.address, target.port).then(
        (stream) => done(null, target.tls ? tlsConnect({ socket: stream, rejectUnauthorized: false }) : stream),
        (error: Error) => done(error),
      );
      return undefined;
    };
    // No agent at all: with `agent: false` Node makes a throwaway Agent that ignores `createConnection`.
    return http.request({ ...options, agent: undefined, createConnection } as http.RequestOptions);
  }
  return target.tls ? https.request({ ...options, rejectUnauthorized: false }) : http.request(options);
}

export interface HttpForwardOptions {
  /** Keep-alive pool: an `https.Agent` for TLS targets; the node's dial pool for targets reached through a dial. */
  agent: http.Agent;
  /** Request headers for the upstream, already filtered and masked (flat raw list). */
  headers: string[];
  /** Checked before each retry: false turns the answer into "sandbox not found". */
  stillRoutable: () => boolean;
  logger: Logger;
  retryDelaysMs?: readonly number[];
  /** Either socket of the exchange idle for this long ends it (0: never). */
  idleTimeoutMs?: number;
  /** Rewrites the upstream's response headers (hop-by-hop already dropped) before they are sent. */
  responseHeaders?: (raw: string[]) => string[];
}

/**
 * What arrives from the upstream in one turn of the event loop (e.g. a Connect stream's last message, its
 * end-stream message and the end of the body) leaves in one write: after the head, the response is corked on
 * a chunk and uncorked once the loop has handled the other I/O of that turn. Fewer packets, fewer client
 * wake-ups.
 */
function coalesceWrites(upstreamRes: IncomingMessage, res: ServerResponse): void {
  let corked = false;
  const uncork = (): void => {
    corked = false;
    // end() uncorks fully by itself (and the socket may serve the next request by now).
    if (!res.writableEnded) res.uncork();
  };
  // Registered before the relay's own listener, so the cork is in place when it writes (the held-back head is
  // written just before, so it is in the cork too). Nothing is corked before the head is written: a client
  // always sees at least the head of what was relayed.
  upstreamRes.on('data', () => {
    if (corked || res.destroyed || !res.headersSent) return;
    corked = true;
    res.cork();
    setImmediate(() => corked && uncork());
  });
  // A broken upstream makes the relay destroy the response: what was relayed so far goes out first (best effort).
  const flushNow = (): void => {
    if (corked && !res.destroyed) uncork();
  };
  upstreamRes.prependListener('error', flushNow);
  upstreamRes.prependListener('aborted', flushNow);
  upstreamRes.prependListener('close', flushNow);
}

/**
 * Streams the upstream body to the client with backpressure and calls `done` once: without an error when the
 * client got all of it, with one when either side broke off first (the caller then destroys both). What
 * stream.pipeline does, without the abort controller and end-of-stream watchers it sets up per exchange.
 */
function relayBody(upstreamRes: IncomingMessage, res: ServerResponse, done: (err?: Error) => void): void {
  let settled = false;
  const finish = (err?: Error): void => {
    if (settled) return;
    settled = true;
    done(err);
  };
  upstreamRes.on('error', finish);
  upstreamRes.once('close', () => {
    if (!upstreamRes.complete) finish(new Error('the sandbox closed the response early'));
  });
  res.on('error', finish);
  res.once('finish', () => finish());
  res.once('close', () => {
    if (!res.writableFinished) finish(new Error('the client went away'));
  });
  upstreamRes.pipe(res);
}

/** A request without a body can be replayed safely when a pooled connection turns out to be dead. */
function hasRequestBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return isChunked(req);
}

function isChunked(req: IncomingMessage): boolean {
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
  const idleTimeoutMs = options.idleTimeoutMs ?? 0;
  const withBody = hasRequestBody(req);
  // The inbound chunked framing was removed with the hop-by-hop headers: re-frame the body as chunked upstream
  // (Node would otherwise send it unframed on methods that are not chunked by default).
  const headers = isChunked(req) ? [...options.headers, 'Transfer-Encoding', 'chunked'] : options.headers;
  let attempt = 0;
  let responded = false;
  let current: ClientRequest | undefined;
  const log = { sandboxId: target.sandboxId, port: target.port };

  res.once('close', () => {
    // Client went away (or we finished): make sure the upstream exchange does not linger.
    if (!res.writableFinished) current?.destroy();
  });
  if (idleTimeoutMs > 0) {
    // A client that stops sending (slow upload) or reading (slow download) does not hold the sockets forever.
    res.setTimeout(idleTimeoutMs, () => {
      // A client waiting for the sandbox's answer is not idle: the upstream idle timeout decides that case.
      if (!responded && req.complete) return;
      options.logger.info(log, 'proxy client idle, closing');
      current?.destroy();
      res.destroy();
    });
  }

  const fail = (reply = proxyErrors.portNotOpen(target.sandboxId, target.port)): void => {
    if (!res.destroyed) sendProxyError(res, req.headers, reply);
  };

  /** The head to send for a valid upstream answer (not sent yet: see `start`); throws for an invalid one. */
  const headFor = (upstreamRes: IncomingMessage): (() => void) => {
    const stripped = stripHopByHop(upstreamRes.rawHeaders);
    const raw = options.responseHeaders ? options.responseHeaders(stripped) : stripped;
    const problem = upstreamHeadProblem(upstreamRes.statusCode, upstreamRes.statusMessage, upstreamRes.rawHeaders);
    if (problem) throw new InvalidUpstreamResponse(problem);
    return () => res.writeHead(upstreamRes.statusCode!, upstreamRes.statusMessage || undefined, raw);
  };

  const start = (): void => {
    const upstream = upstreamRequest(target, {
      host: target.address,
      port: target.port,
      method: req.method,
      path: req.url,
      headers,
      agent: options.agent,
      setHost: false,
    });
    current = upstream;
    let connected = false;
    let relayed: IncomingMessage | undefined;
    // A node's dial has deadlines of its own, and waits out an agent restarting (tunnel-dial.ts): only direct
    // connects are timed here.
    const timer = target.dial
      ? undefined
      : setTimeout(() => {
          if (!connected) upstream.destroy(new DialTimeoutError(target.address, target.port));
        }, CONNECT_TIMEOUT_MS);

    const onConnected = (): void => {
      connected = true;
      clearTimeout(timer);
      if (idleTimeoutMs > 0) upstream.setTimeout(idleTimeoutMs, () => upstream.destroy(new UpstreamIdleTimeout('upstream idle')));
      if (withBody) req.pipe(upstream);
    };
    // A 101 to a request that asked for no upgrade is not HTTP we can relay.
    upstream.on('upgrade', (_res, socket: Socket) => {
      // The socket is detached from the request by now, so no 'error' follows: answer here.
      clearTimeout(timer);
      socket.destroy();
      options.logger.warn({ ...log, err: 'unsolicited 101' }, 'sandbox answered an invalid HTTP response');
      fail(proxyErrors.invalidUpstreamResponse(target.sandboxId, target.port));
    });
    upstream.once('socket', (socket) => {
      (socket as Partial<Socket>).setNoDelay?.(true);
      if (socket.connecting) socket.once('connect', onConnected);
      else onConnected();
    });
    if (!withBody) upstream.end();

    /** The upstream's head while it is held back (until body bytes or the end come, or the next loop turn). */
    let pendingHead: (() => void) | undefined;
    const sendHead = (): void => {
      const head = pendingHead;
      pendingHead = undefined;
      head?.();
    };
    let brokenOff = false;
    /** The exchange broke after the upstream answered: a 502 while nothing went out yet, otherwise a cut response. */
    const breakOff = (): void => {
      upstream.destroy();
      if (brokenOff || res.destroyed) return;
      brokenOff = true;
      if (!pendingHead) {
        res.destroy();
        return;
      }
      pendingHead = undefined;
      options.logger.warn(log, 'sandbox response broke off before any of it was relayed');
      fail(proxyErrors.invalidUpstreamResponse(target.sandboxId, target.port));
    };

    upstream.once('response', (upstreamRes) => {
      upstreamRes.on('error', () => {
        if (responded) breakOff();
      });
      try {
        if (res.destroyed) {
          upstream.destroy();
          return;
        }
        pendingHead = headFor(upstreamRes);
      } catch (err) {
        // Nothing was written yet: the client gets a clean 502 and the upstream connection is dropped.
        options.logger.warn({ ...log, err: (err as Error).message }, 'sandbox answered an invalid HTTP response');
        upstreamRes.resume();
        upstream.destroy();
        fail(proxyErrors.invalidUpstreamResponse(target.sandboxId, target.port));
        return;
      }
      responded = true;
      relayed = upstreamRes;
      // The head leaves with the first body bytes (which flow from the next tick on), so a Connect stream's head
      // and first message reach the client in one packet; registered before the relay's own listeners.
      upstreamRes.once('data', sendHead);
      upstreamRes.once('end', sendHead);
      // Streams (Connect server streams, downloads of unknown length) show their head by the next loop turn even
      // when no body byte came with it.
      if (upstreamRes.headers['content-length'] === undefined) {
        setImmediate(() => {
          if (!pendingHead || res.destroyed) return;
          sendHead();
          res.flushHeaders();
        });
      }
      coalesceWrites(upstreamRes, res);
      relayBody(upstreamRes, res, (err) => {
        if (err) {
          breakOff();
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
        // Junk after a complete response (e.g. a body on a HEAD answer) only spoils the upstream connection.
        if (!relayed?.complete) breakOff();
        return;
      }
      if (res.destroyed || res.headersSent) return;
      const failure = classifyUpstreamError(err);
      if (failure !== 'unreachable') {
        options.logger.warn({ ...log, failure, err: err.message }, 'proxy upstream exchange failed');
        fail(upstreamFailureReply(failure, target.sandboxId, target.port));
        return;
      }
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
      options.logger.debug({ ...log, err: err.message }, 'proxy upstream failed');
      fail();
    });
  };

  start();
}
