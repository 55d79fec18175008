import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { stopAccepting } from './stop-accepting.ts';

/** GET `path` on a keep-alive connection; resolves with the status, the Connection header and the body. */
function get(port: number, path: string, agent: Agent): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res: IncomingMessage) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

describe('stopAccepting (a stopping API replica)', () => {
  let server: Server | undefined;
  afterEach(() => {
    server?.closeAllConnections();
    server = undefined;
  });

  it('refuses new connections at once, closes idle ones, answers the request in flight and resolves once its connection closed', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    server = createServer((req, res: ServerResponse) => {
      if (req.url === '/slow') void held.then(() => res.end('slow answer'));
      else res.end('quick');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const agent = new Agent({ keepAlive: true });
    // An idle keep-alive connection and a request in flight.
    expect((await get(port, '/quick', agent)).connection).toBe('keep-alive');
    const slow = get(port, '/slow', agent);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const stopping = stopAccepting(server, 5_000);
    expect(await refused(port)).toBe(true);
    let done = false;
    void stopping.then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(done).toBe(false);
    release();
    expect(await slow).toMatchObject({ status: 200, body: 'slow answer' });
    expect((await stopping).complete).toBe(true);
    agent.destroy();
  });

  it('gives up after the grace time when a connection stays open', async () => {
    server = createServer(() => undefined); // never answers
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const socket = connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const result = await stopAccepting(server, 300);
    expect(result.complete).toBe(false);
    expect(result.waitedMs).toBeGreaterThanOrEqual(290);
    socket.destroy();
  });
});
