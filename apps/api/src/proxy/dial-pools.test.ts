import { createServer as createHttpServer, request, type Agent, type IncomingMessage, type Server } from 'node:http';
import { connect as connectHttp2, createServer as createHttp2Server, type ClientHttp2Session, type Http2Server, type ServerHttp2Session } from 'node:http2';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { DialPools } from './dial-pools.ts';

/** An agent stand-in: HTTP/2 CONNECT streams piped to a TCP port on this machine (the "container"). */
async function tunnelAgent(sessions: ServerHttp2Session[]): Promise<{ server: Http2Server; url: string }> {
  const server = createHttp2Server();
  server.on('session', (session) => sessions.push(session));
  server.on('stream', (stream, headers) => {
    const [, port] = String(headers[':authority']).split(':');
    const socket = connect(Number(port), '127.0.0.1', () => {
      stream.respond({ ':status': 200 });
      stream.pipe(socket).pipe(stream);
    });
    socket.on('error', () => stream.destroy());
    stream.on('error', () => socket.destroy());
    stream.on('close', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function get(agent: Agent, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '10.0.0.2', port, path: '/', agent }, (res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('DialPools over an agent connection that is shutting down', () => {
  const cleanup: (() => void)[] = [];
  afterEach(() => {
    for (const step of cleanup.splice(0)) step();
  });

  it('closes idle pooled tunnels when the agent sends GOAWAY (its drain ends at once) and pools none again; the next request dials anew', async () => {
    const upstream: Server = createHttpServer((_req, res) => res.end('from the container'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const port = (upstream.address() as AddressInfo).port;
    const serverSessions: ServerHttp2Session[] = [];
    const agent = await tunnelAgent(serverSessions);
    let session: ClientHttp2Session | undefined;
    let dials = 0;
    const dial = (address: string, dialPort: number): Promise<Duplex> =>
      new Promise((resolve, reject) => {
        dials += 1;
        if (!session || session.closed || session.destroyed) session = connectHttp2(agent.url);
        const stream = session.request({ ':method': 'CONNECT', ':authority': `${address}:${dialPort}` });
        stream.once('response', () => resolve(stream));
        stream.once('error', reject);
      });
    const pools = new DialPools({ keepAlive: true, maxFreeSockets: 16, timeout: 60_000 });
    cleanup.push(() => {
      pools.destroy();
      session?.destroy();
      for (const s of serverSessions) s.destroy();
      agent.server.close();
      upstream.closeAllConnections();
      upstream.close();
    });
    const pooled = pools.agentFor(dial, false);
    expect(await get(pooled, port)).toBe('from the container');
    expect(await get(pooled, port)).toBe('from the container');
    expect(dials).toBe(1); // the second request reused the idle tunnel
    expect(Object.values(pooled.freeSockets).flat()).toHaveLength(1);
    // The agent stops: GOAWAY. Its connection closes as soon as its tunnels end: the idle one must not hold it.
    const first = serverSessions[0]!;
    const closed = new Promise<void>((resolve) => first.once('close', () => resolve()));
    first.close();
    const inTime = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2_000))]);
    expect(inTime).toBe(true);
    expect(Object.values(pooled.freeSockets).flat()).toHaveLength(0);
    // The next request opens a new tunnel on a new connection.
    expect(await get(pooled, port)).toBe('from the container');
    expect(dials).toBe(2);
    expect(serverSessions).toHaveLength(2);
  });
});
