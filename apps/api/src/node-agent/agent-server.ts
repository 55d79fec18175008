/**
 * The node agent's listener: HTTPS with mutual TLS only. The TLS layer refuses every client without a certificate
 * from the cluster CA; a certificate that is not a client certificate (a node's own server certificate, say) is
 * dropped right after the handshake, so one node cannot drive another. Routes:
 *   GET  /v1/health                  → { nodeId, version }
 *   GET  /v1/capacity                → NodeCapacity
 *   POST /v1/runtime/watchEvents     → NDJSON event stream (event-stream.ts)
 *   POST /v1/runtime/<method>        → { result } | { error } (runtime-dispatch.ts)
 *   POST /v1/volumes/<method>        → { result } | { error } (agent-volumes.ts: the node's volume directories)
 *   *    /v1/volumecontent/<id>/<op> → the volume-content API for a request the API authorized (agent-volumes.ts)
 *   POST|GET|DELETE /v1/egress/<id>… → a sandbox's pushed secrets and its egress CA (egress-routes.ts)
 *   CONNECT <address>:<port>         → a tunnel to a managed container (container-tunnel.ts)
 *   POST /tidepool.node.v1.NodeService/<method> (HTTP/2) → the node protocol (node-service.ts: Connect)
 * Calls and streams are HTTP/1.1; tunnels are HTTP/2 CONNECT streams (many over one connection) or HTTP/1.1 CONNECT;
 * the node protocol is HTTP/2.
 */
import { createSecureServer, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Session } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { encodeError, NodeChannelError } from '../nodes/node-channel-errors.ts';
import { schemaProblem, WatchEventsArgs } from '../nodes/node-rpc-methods.ts';
import type { NodeCapacity } from '../nodes/sandbox-node.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { sendJson } from './agent-responses.ts';
import { handleStreamTunnel, handleTunnel } from './container-tunnel.ts';
import { serveEvents } from './event-stream.ts';
import { ManagedAddresses } from './managed-addresses.ts';
import { checkCall, runCall } from './runtime-dispatch.ts';
import { type AgentVolumes, VOLUME_CONTENT_PATH } from './agent-volumes.ts';
import type { ImageEngine } from '../runtime/image-engine.ts';
import { buildContainerAddresses, serveImageCall, serveWriteArchive } from './image-routes.ts';
import { EGRESS_PATH, egressCallHasBody, type EgressRouteDeps, serveEgressCall } from './egress-routes.ts';
import { NODE_SERVICE_PATH } from './node-service.ts';
import { type AgentPolicy, PolicyRefusal } from './agent-policy.ts';
import type { AgentMetrics } from './agent-metrics.ts';

/** Largest request body (a startContainer spec with its egress rules fits many times over). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Largest bootContainer body: the spec and the sandbox's `/init` environment (a create's own body is at most 1 MiB, the template's too). */
export const MAX_BOOT_BODY_BYTES = 8 * 1024 * 1024;
/** Calls that make a container the caller must learn of: one the caller left before its answer is removed. */
const CONTAINER_MAKING_CALLS = new Set(['startContainer', 'bootContainer']);
const BODY_TIMEOUT_MS = 30_000;
const CLIENT_AUTH_OID = '1.3.6.1.5.5.7.3.2';

export interface AgentServerOptions {
  nodeId: string;
  version: string;
  runtime: SandboxRuntime;
  capacity: () => Promise<NodeCapacity>;
  tls: { cert: string | Buffer; key: string | Buffer; ca: string | Buffer };
  logger: Logger;
  volumesRoot?: string;
  /** The node's volumes (directories and their content API); none: volume calls are unknown routes. */
  volumes?: AgentVolumes;
  /** The node's image engine: template builds on this node (`/v1/image/…`); none = not served. */
  images?: ImageEngine;
  /** Pushed secrets and per-sandbox CAs of the node's egress proxy (`/v1/egress/…`); none = not served. */
  egress?: EgressRouteDeps;
  /** The node protocol's Connect handler (node-service.ts), for HTTP/2 requests under its path; none = not served. */
  protocol?: (request: Http2ServerRequest, response: Http2ServerResponse) => void;
  /** What the node lets a well-formed call do (agent-policy.ts); none = the call table's checks only. */
  policy?: AgentPolicy;
  /** The agent's own metrics (agent-metrics.ts); none = nothing counted. */
  metrics?: AgentMetrics;
}

class BodyError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(request: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length'] ?? 0);
    if (declared > maxBytes) {
      reject(new BodyError(413, `request body over ${maxBytes} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    // A body trickled in too slowly holds a connection and a buffer: it gets this long in all.
    const timer = setTimeout(() => {
      reject(new BodyError(408, `request body not received within ${BODY_TIMEOUT_MS / 1000} s`));
      request.destroy();
    }, BODY_TIMEOUT_MS);
    request.once('close', () => clearTimeout(timer));
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        reject(new BodyError(413, `request body over ${maxBytes} bytes`));
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.on('error', reject);
    request.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown);
      } catch {
        reject(new BodyError(400, 'request body is not JSON'));
      }
    });
  });
}

/** The sandbox a call is about, when one of its arguments names it (for the log line). */
function sandboxOf(method: string, args: unknown[]): string | undefined {
  if (method === 'commitSandbox' || method === 'claimSandboxImage') return String(args[1]);
  if (method === 'removeSandboxImage' || method === 'applyEgress') return String(args[0]);
  const spec = args[0];
  if (typeof spec === 'object' && spec !== null && 'sandboxId' in spec) return String((spec as { sandboxId: unknown }).sandboxId);
  return undefined;
}

export interface AgentServer {
  server: Http2SecureServer;
  /**
   * Stops listening and ends every connection, open tunnels and event streams included. With `drainMs`, first lets
   * the tunnels in flight finish (at most that long): every HTTP/2 connection gets a GOAWAY (no new tunnel on it;
   * the API opens its next one to the next agent) and is waited for until its last tunnel ends.
   */
  close(options?: { drainMs?: number }): Promise<void>;
}

export function createAgentServer(options: AgentServerOptions): AgentServer {
  const { runtime, logger, nodeId } = options;
  const images = options.images;
  const metrics = options.metrics;
  const managed = new ManagedAddresses(runtime, {}, images ? () => buildContainerAddresses(images) : undefined);
  const server = createSecureServer({
    cert: options.tls.cert,
    key: options.tls.key,
    ca: options.tls.ca,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2',
    allowHTTP1: true,
    // Limits that end the whole connection — every tunnel on it — with INTERNAL_ERROR when passed, sized for tunnel
    // churn: a frame for a stream already closed counts as invalid (a tunnel's two ends close independently, so
    // every closed tunnel can produce some) and Node's default ends the session after 1000 of them; a burst of 50
    // creates on one node ended it every ~1500 tunnels. Node also refuses streams while its table (closed streams
    // linger until collected) holds `maxConcurrentStreams` or its buffers pass `maxSessionMemory`. Only the API's
    // authenticated client reaches this server, and it opens a new connection every TUNNEL_STREAMS_PER_SESSION.
    settings: { maxConcurrentStreams: 65_535 },
    maxSessionMemory: 64,
    maxSessionInvalidFrames: 1_000_000,
  });
  // HTTP/1.1 limits (the fallback reads them from the server): event streams and commits are long, and each
  // runtime call has its own engine deadline, so no request timeout; headers must come quickly.
  Object.assign(server, { headersTimeout: 10_000, requestTimeout: 0, keepAliveTimeout: 30_000 });
  const connections = new Set<TLSSocket>();
  server.on('secureConnection', (socket: TLSSocket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    const usage = socket.getPeerCertificate().ext_key_usage ?? [];
    if (!usage.includes(CLIENT_AUTH_OID)) {
      metrics?.protocolError('not_client_certificate');
      logger.warn({ peer: socket.remoteAddress, subject: socket.getPeerCertificate().subject?.CN }, 'refused a peer whose certificate is not a client certificate');
      socket.destroy();
    }
  });
  // An HTTP/2 connection ended by an error ends every tunnel on it: say why (the API's next tunnel opens another).
  server.on('sessionError', (error: Error) => {
    logger.warn({ err: error.message, code: (error as NodeJS.ErrnoException).code }, 'tunnel connection failed');
  });
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.on('frameError', (type: number, code: number, streamId: number) => logger.warn({ type, code, streamId }, 'tunnel frame not sent'));
  });
  server.on('tlsClientError', (error, socket) => {
    metrics?.protocolError('tls_handshake');
    logger.info({ peer: socket.remoteAddress, reason: error.message }, 'refused a TLS client');
  });
  // Tunnels leave the HTTP server's bookkeeping once upgraded: tracked here so close() can end them.
  const tunnels = new Set<Duplex>();
  server.on('connect', (request: IncomingMessage | Http2ServerRequest, socketOrResponse: unknown, head?: Buffer) => {
    if (request.httpVersionMajor === 2) {
      const { stream } = request as Http2ServerRequest;
      if (metrics) {
        metrics.tunnelOpened();
        stream.once('close', () => metrics.tunnelClosed());
      }
      handleStreamTunnel(stream, request.headers[':authority'] as string | undefined, managed, logger);
      return;
    }
    const socket = socketOrResponse as Duplex;
    tunnels.add(socket);
    metrics?.tunnelOpened();
    socket.once('close', () => {
      tunnels.delete(socket);
      metrics?.tunnelClosed();
    });
    handleTunnel(request as IncomingMessage, socket, head ?? Buffer.alloc(0), managed, logger);
  });
  server.on('request', (request: IncomingMessage | Http2ServerRequest, response: ServerResponse) => {
    if (request.httpVersionMajor === 2 && options.protocol && (request.url ?? '').startsWith(NODE_SERVICE_PATH)) {
      options.protocol(request as Http2ServerRequest, response as unknown as Http2ServerResponse);
      return;
    }
    if (request.httpVersionMajor === 2) {
      // HTTP/2 carries tunnels and the node protocol; the older calls and event streams are HTTP/1.1.
      (response as unknown as { writeHead(status: number, headers: Record<string, string>): void; end(body: string): void }).writeHead(400, { 'content-type': 'application/json' });
      (response as unknown as { end(body: string): void }).end(JSON.stringify({ error: { code: 'bad_call', message: 'over HTTP/2 only CONNECT is served; use HTTP/1.1 for calls' } }));
      return;
    }
    const http1 = request as IncomingMessage;
    void route(http1, response).catch((error: unknown) => {
      logger.error({ err: error }, 'agent request failed');
      sendJson(response, 500, { error: encodeError(error) });
    });
  });

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '').split('?')[0];
    if (request.method === 'GET' && path === '/v1/health') return sendJson(response, 200, { nodeId, version: options.version });
    if (request.method === 'GET' && path === '/v1/capacity') {
      try {
        return sendJson(response, 200, await options.capacity());
      } catch (error) {
        return sendJson(response, 502, { error: encodeError(error) });
      }
    }
    if (options.volumes && VOLUME_CONTENT_PATH.test(path)) return options.volumes.serveContent(request, response);
    const volumeCall = /^\/v1\/volumes\/([A-Za-z]{1,32})$/.exec(path);
    if (options.volumes && request.method === 'POST' && volumeCall) return serveVolumeCall(options.volumes, volumeCall[1], request, response);
    if (options.egress && EGRESS_PATH.test(path)) return serveEgress(options.egress, request, response, path);
    const image = /^\/v1\/image\/([A-Za-z]{1,64})$/.exec(path);
    if (request.method === 'POST' && image && images) {
      if (image[1] === 'writeArchive') return serveWriteArchive(images, request, response, logger);
      let body: unknown;
      try {
        body = await readBody(request);
      } catch (error) {
        metrics?.protocolError('bad_body');
        return sendJson(response, error instanceof BodyError ? error.status : 400, { error: { code: 'bad_call', message: `${image[1]}: ${(error as Error).message}` } });
      }
      return serveImageCall(images, image[1], body, response, logger, { policy: options.policy, metrics, refuse: (error) => refuse(error, image[1], undefined, response) });
    }
    const match = /^\/v1\/runtime\/([A-Za-z]{1,64})$/.exec(path);
    if (request.method !== 'POST' || !match) {
      request.resume();
      metrics?.protocolError('no_route');
      return sendJson(response, 404, { error: { code: 'bad_call', message: `no route ${String(request.method).slice(0, 16)} ${path.slice(0, 128)}` } });
    }
    const method = match[1];
    let body: unknown;
    try {
      body = await readBody(request, method === 'bootContainer' ? MAX_BOOT_BODY_BYTES : MAX_BODY_BYTES);
    } catch (error) {
      const status = error instanceof BodyError ? error.status : 400;
      metrics?.protocolError('bad_body');
      return sendJson(response, status, { error: { code: 'bad_call', message: `${method}: ${(error as Error).message}` } });
    }
    if (method === 'watchEvents') {
      const args = (body as { args?: unknown } | null)?.args;
      const problem = schemaProblem(WatchEventsArgs, args);
      if (problem) {
        metrics?.protocolError('bad_call');
        return sendJson(response, 400, { error: { code: 'bad_call', message: `watchEvents: invalid arguments (${problem})` } });
      }
      return serveEvents(runtime, (args as [number | null])[0], request, response, logger);
    }
    let args: unknown[];
    try {
      args = checkCall(method, body, { volumesRoot: options.volumesRoot });
    } catch (error) {
      if (error instanceof NodeChannelError) logger.warn({ method: method.slice(0, 64), reason: error.message }, 'refused a malformed call');
      metrics?.protocolError('bad_call');
      return sendJson(response, 400, { error: encodeError(error) });
    }
    const started = Date.now();
    try {
      await options.policy?.checkRuntimeCall(method, args);
    } catch (error) {
      if (!(error instanceof PolicyRefusal)) throw error;
      return refuse(error, method, args, response);
    }
    try {
      const result = await runCall(runtime, method, args, logger);
      metrics?.engineCall(method, 'success', (Date.now() - started) / 1000);
      logger.debug({ sandboxId: sandboxOf(method, args), method, ms: Date.now() - started }, 'runtime call');
      if (CONTAINER_MAKING_CALLS.has(method) && (response.destroyed || request.socket.destroyed)) {
        // The caller gave up (its deadline, a crash) before it learned of the container: nobody will ever name
        // it, so it goes now rather than running unowned until a reconcile finds it.
        const { containerId } = result as { containerId: string };
        logger.warn({ sandboxId: sandboxOf(method, args), containerId, ms: Date.now() - started }, 'caller left before its container started; removing it');
        await runtime.remove(containerId).catch((error: unknown) => logger.error({ sandboxId: sandboxOf(method, args), containerId, err: error }, 'removing an unclaimed container failed'));
        return;
      }
      sendJson(response, 200, { result });
    } catch (error) {
      metrics?.engineCall(method, 'error', (Date.now() - started) / 1000);
      logger.warn({ sandboxId: sandboxOf(method, args), method, ms: Date.now() - started, err: error }, 'runtime call failed');
      sendJson(response, 500, { error: encodeError(error) });
    }
  }

  /** A well-formed call the node's policy refused: logged, counted, answered as a bad call; nothing was done. */
  function refuse(error: PolicyRefusal, method: string, args: unknown[] | undefined, response: ServerResponse): void {
    logger.warn({ sandboxId: args ? sandboxOf(method, args) : undefined, method, reason: error.reason, refusal: error.message }, 'refused a call by the node policy');
    metrics?.refused(error.reason);
    sendJson(response, 400, { error: encodeError(error) });
  }

  async function serveEgress(egress: EgressRouteDeps, request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    let body: unknown;
    if (egressCallHasBody(request.method, path)) {
      try {
        body = await readBody(request);
      } catch (error) {
        return sendJson(response, error instanceof BodyError ? error.status : 400, { error: { code: 'bad_call', message: `egress: ${(error as Error).message}` } });
      }
    } else request.resume();
    const answer = await serveEgressCall(request.method, path, body, egress);
    sendJson(response, answer.status, answer.body);
  }

  async function serveVolumeCall(volumes: AgentVolumes, method: string, request: IncomingMessage, response: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = await readBody(request);
    } catch (error) {
      const status = error instanceof BodyError ? error.status : 400;
      return sendJson(response, status, { error: { code: 'bad_call', message: `volumes/${method}: ${(error as Error).message}` } });
    }
    try {
      sendJson(response, 200, { result: await volumes.call(method, body) });
    } catch (error) {
      const refused = error instanceof NodeChannelError && error.code === 'bad_call';
      if (refused) {
        logger.warn({ method, reason: error.message }, 'refused a malformed volume call');
        metrics?.protocolError('bad_call');
      }
      else logger.error({ method, err: error }, 'volume call failed');
      sendJson(response, refused ? 400 : 500, { error: encodeError(error) });
    }
  }

  return {
    server,
    async close(closeOptions = {}) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const drainMs = closeOptions.drainMs ?? 0;
      if (drainMs > 0 && sessions.size > 0) {
        const open = [...sessions];
        const drained = Promise.all(open.map((session) => new Promise<void>((resolve) => (session.destroyed ? resolve() : session.once('close', () => resolve())))));
        for (const session of open) if (!session.closed) session.close();
        let timer: NodeJS.Timeout | undefined;
        const started = Date.now();
        const inTime = await Promise.race([drained.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), drainMs)))]);
        clearTimeout(timer);
        logger.info({ connections: open.length, drainedMs: Date.now() - started, complete: inTime }, inTime ? 'tunnels in flight finished' : 'tunnels still open after the drain time are cut');
      }
      for (const socket of tunnels) socket.destroy();
      for (const socket of connections) socket.destroy();
      await closed;
    },
  };
}
