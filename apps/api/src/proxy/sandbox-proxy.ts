import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { statusOf } from '../http/api-errors.ts';
import { type MetricsSink, noMetrics, statusClass } from '../observability/metrics-sink.ts';
import { checkTrafficToken, envdCallerOf, mayAutoResume } from './access-checks.ts';
import { cleanRequestPath, isEnvdControlRoute } from './control-routes.ts';
import { type ConnectionKind, ConnectionLimiter, DEFAULT_PROXY_LIMITS, type ProxyLimits } from './connection-limits.ts';
import { forwardHttp, type UpstreamTarget } from './http-forwarder.ts';
import { DialPools } from './dial-pools.ts';
import { requestFramingProblem } from './message-checks.ts';
import { proxyErrorReasonOf, proxyErrors, sendProxyError, writeProxyErrorToSocket, type ProxyErrorReply } from './proxy-errors.ts';
import { resolveRouteTarget, type RouteTarget } from './route-target.ts';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import type { RoutableSandbox, SandboxDirectory } from './sandbox-directory.ts';
import { findSignedUrlOwner, parseSignedFilesQuery } from './signed-url-owner.ts';
import { inertResponseHeaders } from './inert-response.ts';
import { applyHostMask, stripHopByHop } from './upstream-headers.ts';
import { forwardUpgrade } from './websocket-forwarder.ts';

export interface SandboxProxyOptions {
  directory: SandboxDirectory;
  /** Sandbox domain: hosts look like `<port>-<sandboxID>.<domain>`. */
  domain: string;
  logger: Logger;
  /** Connection caps and idle timeouts; defaults in DEFAULT_PROXY_LIMITS. */
  limits?: Partial<ProxyLimits>;
  /** Request durations by status class and the proxy's own error answers by reason. */
  metrics?: MetricsSink;
}

/** A sandbox that may receive this request, the port it is for and the connection cap it counts against. */
interface Admitted {
  sandbox: RoutableSandbox & { address: string };
  port: number;
  kind: ConnectionKind;
}

type Admission = Admitted | ProxyErrorReply;

function isReply(value: Admission): value is ProxyErrorReply {
  return 'status' in value;
}

function upstreamTarget(sandbox: RoutableSandbox & { address: string }, port: number): UpstreamTarget {
  return { sandboxId: sandbox.sandboxId, address: sandbox.address, port, tls: port !== ENVD_PORT && sandbox.httpsPorts.includes(port), dial: sandbox.dial };
}

const POOL_OPTIONS: http.AgentOptions = {
  keepAlive: true,
  keepAliveMsecs: 15_000,
  maxSockets: Infinity,
  maxFreeSockets: 1024,
  // Only idle pooled sockets are reaped by this; active streams are not cut by it.
  timeout: 60_000,
  scheduling: 'lifo',
};

/**
 * The routing edge: decides whether a request is for a sandbox, applies the edge rules (control routes, traffic
 * token, auto-resume) and hands it to the HTTP or upgrade forwarder. Everything else is left to the API.
 */
export class SandboxProxy {
  /** One keep-alive pool for every sandbox; Node keys it by address:port, so it is per sandbox port in effect. */
  readonly agent = new http.Agent(POOL_OPTIONS);
  /** The same for ports listed in `network.httpsPorts`; certificates in sandboxes are not verified (self-signed work). */
  readonly tlsAgent = new https.Agent({ ...POOL_OPTIONS, rejectUnauthorized: false });
  /** The same for sandboxes reached through their node's dial (another machine): one pool per node. */
  readonly dialPools = new DialPools(POOL_OPTIONS);
  private readonly resumes = new Map<string, Promise<RoutableSandbox>>();
  private readonly tunnels = new Set<Duplex>();
  readonly limits: ProxyLimits;
  readonly connections: ConnectionLimiter;

  constructor(private readonly options: SandboxProxyOptions) {
    this.limits = { ...DEFAULT_PROXY_LIMITS, ...options.limits };
    this.connections = new ConnectionLimiter(this.limits);
  }

  /** Returns false when the request is not for a sandbox (the API handles it). */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    const target = this.targetOf(req);
    if (target.kind === 'api') return false;
    const admission = this.route(req, target);
    this.measure(res);
    const servedOnApiOrigin = target.kind === 'signed-files';
    const go = (result: Admission): void => {
      if (isReply(result)) {
        sendProxyError(res, req.headers, result);
        return;
      }
      const { sandbox, port } = result;
      const release = this.acquireConnection(result, req);
      if (typeof release !== 'function') {
        sendProxyError(res, req.headers, release);
        return;
      }
      res.once('close', () => {
        release();
        this.options.directory.served?.(sandbox.sandboxId);
      });
      const target = upstreamTarget(sandbox, port);
      forwardHttp(req, res, target, {
        agent: target.dial ? this.dialPools.agentFor(target.dial, target.tls) : target.tls ? this.tlsAgent : this.agent,
        headers: applyHostMask(stripHopByHop(req.rawHeaders), port === ENVD_PORT ? undefined : sandbox.maskRequestHost, port),
        stillRoutable: () => this.stillRoutable(sandbox),
        logger: this.options.logger,
        idleTimeoutMs: this.limits.idleTimeoutMs,
        // A signed /files URL is served on the API's own origin: its answer is made inert there.
        ...(servedOnApiOrigin ? { responseHeaders: inertResponseHeaders } : {}),
      });
    };
    const guarded = (result: Admission): void => {
      try {
        go(result);
      } catch (err) {
        this.internalError(err, () => (res.headersSent ? res.destroy() : sendProxyError(res, req.headers, proxyErrors.sandboxNotFound(''))));
      }
    };
    if (admission instanceof Promise) admission.then(guarded, (err) => this.internalError(err, () => guarded(proxyErrors.sandboxNotFound(''))));
    else guarded(admission);
    return true;
  }

  /** A connection slot for this sandbox, kind and client address (released by the caller), or the 429 reply when full. */
  private acquireConnection({ sandbox: { sandboxId }, port, kind }: Admitted, req: IncomingMessage): (() => void) | ProxyErrorReply {
    const release = this.connections.acquire(sandboxId, req.socket.remoteAddress ?? '', kind);
    if (typeof release !== 'function') this.options.logger.warn({ sandboxId, port, kind, client: req.socket.remoteAddress }, 'proxy connection limit reached');
    return release;
  }

  /** Returns false when the upgrade is not for a sandbox. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const target = this.targetOf(req);
    if (target.kind === 'api') return false;
    const admission = this.route(req, target);
    socket.once('close', () => this.countError(socket));
    const go = (result: Admission): void => {
      if (isReply(result)) {
        writeProxyErrorToSocket(socket, req.headers, result);
        return;
      }
      const { sandbox, port } = result;
      const release = this.acquireConnection(result, req);
      if (typeof release !== 'function') {
        writeProxyErrorToSocket(socket, req.headers, release);
        return;
      }
      socket.once('close', release);
      (socket as Socket).setNoDelay?.(true);
      this.track(socket);
      forwardUpgrade(req, socket, head, upstreamTarget(sandbox, port), {
        headers: applyHostMask(req.rawHeaders, port === ENVD_PORT ? undefined : sandbox.maskRequestHost, port),
        stillRoutable: () => this.stillRoutable(sandbox),
        logger: this.options.logger,
        track: (upstream) => this.track(upstream),
        idleTimeoutMs: this.limits.idleTimeoutMs,
      });
    };
    const guarded = (result: Admission): void => {
      try {
        go(result);
      } catch (err) {
        this.internalError(err, () => socket.destroy());
      }
    };
    if (admission instanceof Promise) admission.then(guarded, (err) => this.internalError(err, () => guarded(proxyErrors.sandboxNotFound(''))));
    else guarded(admission);
    return true;
  }

  /** Cuts every proxied tunnel and pooled upstream connection (server shutdown). */
  close(): void {
    for (const socket of this.tunnels) socket.destroy();
    this.tunnels.clear();
    this.agent.destroy();
    this.tlsAgent.destroy();
    this.dialPools.destroy();
  }

  /** When the exchange ends: its duration by status class (`aborted` when nothing was answered), and the proxy's own error. */
  private measure(res: ServerResponse): void {
    const started = performance.now();
    res.once('close', () => {
      (this.options.metrics ?? noMetrics).proxyRequest(statusClass(res.headersSent ? res.statusCode : undefined), (performance.now() - started) / 1000);
      this.countError(res);
    });
  }

  private countError(target: object): void {
    const reason = proxyErrorReasonOf(target);
    if (reason) (this.options.metrics ?? noMetrics).proxyError(reason);
  }

  private track(socket: Duplex): void {
    this.tunnels.add(socket);
    socket.once('close', () => this.tunnels.delete(socket));
  }

  private internalError(err: unknown, then: () => void): void {
    this.options.logger.error({ err }, 'sandbox proxy failed');
    then();
  }

  private stillRoutable(sandbox: RoutableSandbox): boolean {
    const now = this.options.directory.find(sandbox.sandboxId);
    return now !== undefined && now.state === 'running' && now.address === sandbox.address;
  }

  private targetOf(req: IncomingMessage): RouteTarget {
    return resolveRouteTarget(req.method, req.url ?? '/', req.headers, this.options.domain);
  }

  /** The admission decision for sandbox traffic, synchronous unless a resume is needed. */
  private route(req: IncomingMessage, target: Exclude<RouteTarget, { kind: 'api' }>): Admission | Promise<Admission> {
    const url = req.url ?? '/';
    const refusal = this.framingRefusal(req);
    if (refusal) return refusal;
    switch (target.kind) {
      case 'invalid':
        return proxyErrors.invalidRoute(target.message);
      case 'signed-files': {
        const query = parseSignedFilesQuery(req.method, url);
        const owner = query && findSignedUrlOwner(query, this.options.directory.running());
        if (!owner) return proxyErrors.sandboxNotFound('');
        return this.admit(owner.sandboxId, ENVD_PORT, req);
      }
      case 'sandbox':
        return this.admit(target.sandboxId, target.port, req);
    }
  }

  /** Requests whose body framing is ambiguous never reach a sandbox (request smuggling). */
  private framingRefusal(req: IncomingMessage): ProxyErrorReply | undefined {
    const problem = requestFramingProblem(req.method, req.rawHeaders);
    if (!problem) return undefined;
    this.options.logger.info({ client: req.socket.remoteAddress, problem }, 'proxy refused an ambiguous request');
    return proxyErrors.badRequest(`Bad request: ${problem}`);
  }

  private admit(sandboxId: string, port: number, req: IncomingMessage): Admission | Promise<Admission> {
    if (port === ENVD_PORT && isEnvdControlRoute(req.url ?? '/')) {
      return proxyErrors.controlRoute(cleanRequestPath(req.url ?? '/'));
    }
    const sandbox = this.options.directory.find(sandboxId);
    if (sandbox) return this.admitFound(sandbox, port, req);
    const { directory } = this.options;
    const missing = (): Admission => {
      const unavailable = directory.unavailableReason?.(sandboxId);
      return unavailable ? proxyErrors.sandboxUnavailable(sandboxId, unavailable) : proxyErrors.sandboxNotFound(sandboxId);
    };
    if (!directory.lookup) return missing();
    // Not known here yet (another API replica's sandbox): one read of the shared store, then routed like any other.
    return directory.lookup(sandboxId).then(
      (found) => (found ? this.admitFound(found, port, req) : missing()),
      (err: unknown) => {
        this.options.logger.error({ err, sandboxId }, 'reading a sandbox from the shared store failed');
        return missing();
      },
    );
  }

  private admitFound(sandbox: RoutableSandbox, port: number, req: IncomingMessage): Admission | Promise<Admission> {
    const { sandboxId } = sandbox;
    if (sandbox.state === 'paused') {
      if (!sandbox.autoResume) return proxyErrors.sandboxNotFound(sandboxId);
      if (!mayAutoResume(sandbox, port, req.headers)) return proxyErrors.resumeForbidden(sandboxId);
      // A call envd would refuse does not wake the sandbox (a public one resumes for anyone otherwise).
      const kind = this.connectionKind(sandbox, port, req);
      if (typeof kind !== 'string') return kind;
      return this.resume(sandboxId).then(
        (resumed) => this.admitRunning(resumed, port, req),
        (err: unknown) => this.resumeFailure(sandboxId, err),
      );
    }
    return this.admitRunning(sandbox, port, req);
  }

  private admitRunning(sandbox: RoutableSandbox, port: number, req: IncomingMessage): Admission {
    if (sandbox.state !== 'running' || !sandbox.address) return proxyErrors.sandboxNotFound(sandbox.sandboxId);
    const denied = checkTrafficToken(sandbox, port, req.headers);
    if (denied) return denied;
    const kind = this.connectionKind(sandbox, port, req);
    if (typeof kind !== 'string') return kind;
    return { sandbox: sandbox as RoutableSandbox & { address: string }, port, kind };
  }

  /**
   * The cap a request counts against: envd calls with the access token apart from envd calls without it, so
   * anonymous clients never take the owner's slots; an envd call that needs the token and lacks it is refused
   * here with envd's 401 and takes no slot at all.
   */
  private connectionKind(sandbox: RoutableSandbox, port: number, req: IncomingMessage): ConnectionKind | ProxyErrorReply {
    if (port !== ENVD_PORT) return 'app';
    const caller = envdCallerOf(sandbox, req.method, req.url ?? '/', req.headers);
    if (caller === 'owner') return 'envd';
    if (caller === 'anonymous') return 'envd-anonymous';
    this.options.logger.info({ sandboxId: sandbox.sandboxId, client: req.socket.remoteAddress }, 'proxy refused an envd call without its access token');
    return caller;
  }

  /** One resume per sandbox at a time, however many requests wait for it. */
  private resume(sandboxId: string): Promise<RoutableSandbox> {
    let pending = this.resumes.get(sandboxId);
    if (!pending) {
      pending = this.options.directory.resumeForTraffic(sandboxId).finally(() => this.resumes.delete(sandboxId));
      this.resumes.set(sandboxId, pending);
    }
    return pending;
  }

  /**
   * A refused resume, answered as the reference edge does. The status comes from the REST layer's one classifier
   * (a platform error's kind), so the proxy and `POST /connect` agree; anything else (gone, engine failure) reads
   * as a sandbox that cannot be reached: 502 not found.
   */
  private resumeFailure(sandboxId: string, err: unknown): ProxyErrorReply {
    const error = err instanceof Error ? err : new Error(String(err));
    const status = statusOf(error);
    const log = this.options.logger.child({ sandboxId });
    if (status >= 500) log.error({ err: error, status }, 'auto-resume failed');
    else log.info({ status, reason: error.message }, 'auto-resume refused');
    if (status === 409) return proxyErrors.stillTransitioning(sandboxId);
    if (status === 429) return proxyErrors.resumeLimited(sandboxId, error.message || 'Too many sandboxes');
    if (status === 403 || status === 401) return proxyErrors.resumeForbidden(sandboxId);
    return proxyErrors.sandboxNotFound(sandboxId);
  }
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Puts the sandbox proxy in front of the API on the same listener. The server's `request` listener (fastify's
 * handler) is wrapped, so sandbox traffic is taken over before fastify sees it: no routing, no body parsing,
 * bodies stream raw both ways. Upgrades are piped as raw TCP.
 */
export function installSandboxProxy(app: FastifyInstance, options: SandboxProxyOptions): SandboxProxy {
  const proxy = new SandboxProxy(options);
  const server = app.server as http.Server;
  const apiListeners = server.listeners('request') as RequestListener[];
  if (apiListeners.length === 0) throw new Error('installSandboxProxy: the fastify server has no request listener');
  server.removeAllListeners('request');
  const toApi: RequestListener =
    apiListeners.length === 1
      ? apiListeners[0]!
      : (req, res) => {
          for (const listener of apiListeners) listener.call(server, req, res);
        };
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!proxy.handleRequest(req, res)) toApi.call(server, req, res);
  });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (proxy.handleUpgrade(req, socket, head)) return;
    // Nobody else takes upgrades: refuse instead of leaving the socket hanging.
    if (server.listenerCount('upgrade') === 1) {
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    }
  };
  server.on('upgrade', onUpgrade);
  try {
    // Proxied streams (commands, pty, WebSockets) would otherwise hold app.close() open until they end.
    app.addHook('preClose', async () => {
      proxy.close();
    });
  } catch (err) {
    options.logger.warn({ err }, 'sandbox proxy installed after boot: call proxy.close() on shutdown yourself');
  }
  return proxy;
}
