import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { EnvdContext } from '../context.ts';
import { SystemUsers } from '../identity/system-users.ts';
import { createLogger } from '../logger.ts';
import { EnvdState } from '../state.ts';
import { externalIpv4Addresses, startLocalPortForwarder } from './local-port-forwarder.ts';

const external = externalIpv4Addresses()[0];

function context(): EnvdContext {
  return {
    config: { port: 49983, host: '0.0.0.0', logLevel: 'silent', forwardLocalPorts: true, debug: true, ignoredEnv: [], accessTokenFile: '/nonexistent', spawnServer: true, startFastPath: true },
    state: new EnvdState(),
    users: new SystemUsers(),
    logger: createLogger('silent'),
  };
}

async function echoServer(host: string): Promise<Server> {
  const server = createServer((socket) => socket.pipe(socket));
  server.listen({ port: 0, host });
  await once(server, 'listening');
  return server;
}

/** Sends `text` to host:port and resolves with the echo, or rejects (refused, reset). */
function roundTrip(host: string, port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = '';
    socket.setTimeout(1_000, () => socket.destroy(new Error('timeout')));
    socket.on('connect', () => socket.write(text));
    socket.on('data', (chunk) => {
      received += chunk.toString();
      if (received.length >= text.length) {
        socket.end();
        resolve(received);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('closed before the echo')));
  });
}

async function eventually<T>(attempt: () => Promise<T>, timeoutMs = 4_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe.skipIf(!external)('local port forwarder', () => {
  it('exposes a 127.0.0.1-only service on the external address and stops when it goes away', async () => {
    const server = await echoServer('127.0.0.1');
    const port = (server.address() as AddressInfo).port;
    const forwarder = startLocalPortForwarder(context(), { intervalMs: 100 });
    cleanups.push(() => forwarder.stop(), () => server.close());
    expect(await eventually(() => roundTrip(external!, port, 'ping'))).toBe('ping');
    server.close();
    await eventually(async () => {
      const outcome = await roundTrip(external!, port, 'x').then(() => 'open', () => 'closed');
      if (outcome !== 'closed') throw new Error('still forwarded');
    });
  });

  it('forwards a ::1-only service to ::1 and leaves wildcard listeners alone', async () => {
    const v6 = await echoServer('::1').catch(() => undefined);
    const wildcard = await echoServer('0.0.0.0');
    const wildcardPort = (wildcard.address() as AddressInfo).port;
    const forwarder = startLocalPortForwarder(context(), { intervalMs: 100 });
    cleanups.push(() => forwarder.stop(), () => wildcard.close(), () => v6?.close());
    if (v6) expect(await eventually(() => roundTrip(external!, (v6.address() as AddressInfo).port, 'six'))).toBe('six');
    // The wildcard service answers on the external address by itself; the forwarder must not have claimed it.
    expect(await roundTrip(external!, wildcardPort, 'any')).toBe('any');
  });
});
