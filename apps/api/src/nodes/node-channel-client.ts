/**
 * The HTTP side of the API's node channel: one keep-alive HTTPS agent per node presenting the API's client
 * certificate (and trusting only the cluster CA), JSON calls with a deadline each, and bounded answers. Anything
 * but the protocol (a refused connection, a node that hangs, garbage) becomes a NodeChannelError, never a crash.
 */
import { connect as connectHttp2, type ClientHttp2Session } from 'node:http2';
import { Agent, request } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { PeerCertificate } from 'node:tls';
import { NodeChannelError } from './node-channel-errors.ts';
import { certificateNamesNode } from './node-protocol.ts';

/**
 * Tunnels opened on one HTTP/2 connection before the next tunnel opens a new one: Node keeps a closed stream in the
 * session's table until it is garbage-collected and counts a session's invalid frames (frames for streams already
 * closed) for its whole life, so a long-lived session under steady tunnel churn must not grow either without bound.
 */
export const TUNNEL_STREAMS_PER_SESSION = 1_024;

export interface NodeTls {
  /** PEM of the cluster CA, the API's client certificate and its key. */
  ca: string | Buffer;
  cert: string | Buffer;
  key: string | Buffer;
}

/** Largest JSON answer the client reads (a listManaged of a very full node fits easily). */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

export class NodeChannel {
  readonly agent: Agent;
  readonly base: URL;
  /** The HTTP/2 connection tunnels are streams of (opened on first use, replaced once it closes). */
  private session: ClientHttp2Session | undefined;
  /** Tunnels opened on `session`: it is replaced after `streamsPerSession` (see the agent server). */
  private streamsOnSession = 0;

  constructor(
    readonly nodeId: string,
    url: string,
    private readonly tls: NodeTls,
    private readonly streamsPerSession = TUNNEL_STREAMS_PER_SESSION,
  ) {
    this.base = new URL(url);
    if (this.base.protocol !== 'https:') throw new NodeChannelError('bad_call', `node URL must be https://host:port, got ${url}`, nodeId);
    this.agent = new Agent({ keepAlive: true, maxSockets: 128, maxFreeSockets: 16, ca: tls.ca, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2', checkServerIdentity: this.checkIdentity });
  }

  /**
   * Every connection to the node checks that the peer's certificate names this node's id (a DNS subjectAltName), not
   * the dialled address: the id was bound to the certificate at the node's Hello, and an address may change hands.
   */
  private readonly checkIdentity = (_host: string, certificate: PeerCertificate): Error | undefined =>
    certificateNamesNode(certificate.subjectaltname, this.nodeId)
      ? undefined
      : new NodeChannelError('identity', `the agent at ${this.base.host} presented a certificate that does not name node "${this.nodeId}" (${JSON.stringify((certificate.subjectaltname ?? 'no names').slice(0, 200))})`, this.nodeId);

  fail(code: NodeChannelError['code'], message: string): NodeChannelError {
    return new NodeChannelError(code, message, this.nodeId);
  }

  /** Sends one request (`body`: JSON, or a stream sent as is); resolves with the response once its head arrived (the deadline keeps running for the body). */
  open(method: string, path: string, body: unknown, deadlineMs: number, what: string): { response: Promise<IncomingMessage>; abort(error?: Error): void; timedOut(): boolean } {
    // A stream body (tar-stream's packs are streamx streams, not node Readables: anything with pipe()).
    const raw = isStream(body) ? body : undefined;
    const text = body === undefined || raw ? undefined : JSON.stringify(body);
    const req = request({
      agent: this.agent,
      protocol: 'https:',
      hostname: this.base.hostname.replace(/^\[|\]$/g, ''),
      port: this.base.port || 443,
      method,
      path,
      headers: raw ? { 'content-type': 'application/x-tar' } : text === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
    });
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      req.destroy(this.fail('deadline', `${what}: no answer within ${deadlineMs >= 1000 ? `${Math.round(deadlineMs / 1000)} s` : `${deadlineMs} ms`}`));
    }, deadlineMs);
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      req.once('response', resolve);
      req.once('error', (error: Error) => reject(error instanceof NodeChannelError ? error : this.fail('unreachable', `${what}: ${error.message}`)));
    });
    response.catch(() => undefined);
    req.once('close', () => clearTimeout(timer));
    if (raw) {
      // A streamed body (a tar into a build container): a failing source fails the request.
      raw.once('error', (error: Error) => req.destroy(this.fail('unreachable', `${what}: the streamed body failed: ${error.message}`)));
      raw.pipe(req);
    } else {
      req.end(text);
    }
    return {
      response: response.then((res) => {
        res.once('close', () => clearTimeout(timer));
        return res;
      }),
      abort: (error?: Error) => {
        clearTimeout(timer);
        req.destroy(error);
      },
      timedOut: () => expired,
    };
  }

  /** A JSON call: the parsed answer and its status. Bounded in time (`deadlineMs`, head and body) and size. */
  async json(method: string, path: string, body: unknown, deadlineMs: number, what: string): Promise<{ status: number; value: unknown }> {
    return this.readJson(this.open(method, path, body, deadlineMs, what), what, deadlineMs);
  }

  /** The JSON answer of a request `open` sent (bounded in size; the request's own deadline keeps running). */
  async readJson(call: ReturnType<NodeChannel['open']>, what: string, deadlineMs = 0): Promise<{ status: number; value: unknown }> {
    const res = await call.response;
    const chunks: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) {
          const error = this.fail('protocol', `${what}: answer over ${MAX_ANSWER_BYTES} bytes`);
          call.abort(error);
          reject(error);
          return;
        }
        chunks.push(chunk);
      });
      res.once('end', resolve);
      res.once('error', (error: Error) =>
        reject(error instanceof NodeChannelError ? error : call.timedOut() ? this.fail('deadline', `${what}: answer not complete within ${deadlineMs} ms`) : this.fail('unreachable', `${what}: ${error.message}`)),
      );
      res.once('aborted', () => reject(call.timedOut() ? this.fail('deadline', `${what}: answer not complete within ${deadlineMs} ms`) : this.fail('unreachable', `${what}: connection closed mid-answer`)));
    });
    const text = Buffer.concat(chunks).toString('utf8');
    try {
      return { status: res.statusCode ?? 0, value: JSON.parse(text) as unknown };
    } catch {
      throw this.fail('protocol', `${what}: answered HTTP ${res.statusCode} with a body that is not JSON (${JSON.stringify(text.slice(0, 80))})`);
    }
  }

  /** The open HTTP/2 connection to the agent, or a new one. */
  tunnelSession(): ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed && this.streamsOnSession < this.streamsPerSession) {
      this.streamsOnSession += 1;
      return this.session;
    }
    // A session that carried its share goes quietly: its open tunnels finish on it, new ones use the next.
    if (this.session && !this.session.closed) this.session.close();
    this.streamsOnSession = 1;
    const session = connectHttp2(this.base.origin, { ca: this.tls.ca, cert: this.tls.cert, key: this.tls.key, minVersion: 'TLSv1.2', checkServerIdentity: this.checkIdentity });
    session.on('error', () => undefined); // each stream reports its own failure
    const forget = (): void => {
      if (this.session === session) this.session = undefined;
    };
    session.once('close', forget);
    session.once('goaway', forget);
    session.unref(); // an idle connection keeps no process alive
    this.session = session;
    return session;
  }

  /** Drops the HTTP/2 connection (a node that stopped answering): the next tunnel opens a new one. */
  dropTunnelSession(): void {
    this.session?.destroy();
    this.session = undefined;
  }

  close(): void {
    this.agent.destroy();
    this.dropTunnelSession();
  }
}

function isStream(body: unknown): body is Readable {
  return typeof body === 'object' && body !== null && typeof (body as { pipe?: unknown }).pipe === 'function';
}
