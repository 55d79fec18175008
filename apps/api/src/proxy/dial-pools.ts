/**
 * Keep-alive pools for sandboxes on another machine: a proxied request to a sandbox reached through its node's dial
 * reuses an idle stream to the same address and port, as a direct connection from the embedded node reuses its
 * socket, instead of opening a tunnel (an HTTP/2 CONNECT to the agent and a TCP connect there) per exchange. One
 * pool per dial (a node: container addresses of two nodes may be the same), one for plain ports and one for ports
 * that speak TLS (TLS is set up on top of the tunnel; certificates in sandboxes are not verified, as directly).
 */
import http from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, TLSSocket } from 'node:tls';

export type Dial = (address: string, port: number) => Promise<Duplex>;

/**
 * What http.Agent calls on a pooled socket, made no-ops: a tunnel stream (an HTTP/2 stream) has none of them, and a
 * TLS socket over one has no handle (its ref/unref would queue a listener for a 'connect' that never comes, at every
 * reuse). TCP keep-alive, Nagle and event-loop references belong to the one connection to the agent.
 */
function asPoolableSocket(stream: Duplex): Duplex {
  // A plain TCP socket (a dial that connects directly: tests' in-process nodes) has them all, working.
  if (stream instanceof Socket && !(stream instanceof TLSSocket)) return stream;
  const socket = stream as Duplex & Record<'setKeepAlive' | 'ref' | 'unref' | 'setNoDelay', () => unknown>;
  for (const method of ['setKeepAlive', 'ref', 'unref', 'setNoDelay'] as const) socket[method] = () => socket;
  return socket;
}

type Created = (error: Error | null, socket?: Duplex) => void;

/** What a dialled stream rides on when it is an HTTP/2 stream (a node's tunnel): its connection to the agent. */
interface StreamSession {
  readonly closed: boolean;
  readonly destroyed: boolean;
  once(event: 'goaway' | 'close', listener: () => void): unknown;
}

function sessionOf(stream: Duplex): StreamSession | undefined {
  const session = (stream as { session?: unknown }).session;
  return typeof session === 'object' && session !== null && typeof (session as StreamSession).once === 'function' ? (session as StreamSession) : undefined;
}

/**
 * An http.Agent whose connections are streams of `dial`; pooled with `options` like direct ones. A stream whose
 * agent connection is shutting down (the agent sent GOAWAY: it is stopping, a rolling upgrade) is not pooled again,
 * and the idle ones are closed at once, so no request is sent on a tunnel the agent is about to end and the agent's
 * drain is not held up by idle keep-alive tunnels; the next request dials anew (and waits for the new agent).
 */
class DialAgent extends http.Agent {
  private readonly sessions = new WeakMap<Duplex, StreamSession>();
  private readonly watched = new WeakSet<StreamSession>();

  constructor(
    private readonly dial: Dial,
    private readonly tls: boolean,
    options: http.AgentOptions,
  ) {
    super(options);
  }

  /** Called by http.Agent for a new connection (Node takes the callback form when nothing is returned). */
  createConnection(options: { host?: string; port?: number | string }, done: Created): undefined {
    this.dial(String(options.host), Number(options.port)).then(
      (stream) => {
        const socket = asPoolableSocket(this.tls ? tlsConnect({ socket: stream, rejectUnauthorized: false }) : stream);
        const session = sessionOf(stream);
        if (session) this.follow(socket, session);
        done(null, socket);
      },
      (error: Error) => done(error),
    );
    return undefined;
  }

  keepSocketAlive(socket: Socket): boolean {
    const session = this.sessions.get(socket);
    if (session && (session.closed || session.destroyed)) return false;
    // Node's Agent answers whether it kept the socket (its type declarations say void).
    const kept: unknown = super.keepSocketAlive(socket);
    return kept !== false;
  }

  private follow(socket: Duplex, session: StreamSession): void {
    this.sessions.set(socket, session);
    if (this.watched.has(session)) return;
    this.watched.add(session);
    session.once('goaway', () => this.closeIdleOn(session));
  }

  /** Closes the pooled (idle) streams riding on `session`; busy ones finish their exchange and are not pooled again. */
  private closeIdleOn(session: StreamSession): void {
    for (const sockets of Object.values(this.freeSockets)) {
      for (const socket of [...(sockets ?? [])]) if (this.sessions.get(socket) === session) socket.destroy();
    }
  }
}

/** The proxy's pools of dialled connections, by dial and TLS; all closed with the proxy. */
export class DialPools {
  private readonly pools = new Map<Dial, { plain: DialAgent; tls: DialAgent }>();

  constructor(private readonly options: http.AgentOptions) {}

  agentFor(dial: Dial, tls: boolean): http.Agent {
    let pools = this.pools.get(dial);
    if (!pools) {
      pools = { plain: new DialAgent(dial, false, this.options), tls: new DialAgent(dial, true, this.options) };
      this.pools.set(dial, pools);
    }
    return tls ? pools.tls : pools.plain;
  }

  /** True for an agent of these pools (its requests need no dial of their own). */
  static owns(agent: unknown): boolean {
    return agent instanceof DialAgent;
  }

  destroy(): void {
    for (const { plain, tls } of this.pools.values()) {
      plain.destroy();
      tls.destroy();
    }
    this.pools.clear();
  }
}
