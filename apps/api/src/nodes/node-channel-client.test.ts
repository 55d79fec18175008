import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureClusterTls, ensureNodeServerTls, getFreePort } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeChannel } from './node-channel-client.ts';
import { NodeChannelError } from './node-channel-errors.ts';
import { dialThroughAgent } from './tunnel-dial.ts';

/** An agent stand-in: answers every CONNECT with 200 and echoes the tunnel's bytes; counts its HTTP/2 sessions. */
function echoAgent(tls: { ca: string; cert: string; key: string }, sessions: ServerHttp2Session[]): Http2SecureServer {
  const server = createSecureServer({ ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key), requestCert: true });
  server.on('session', (session) => sessions.push(session));
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.pipe(stream);
  });
  return server;
}

async function echoOnce(tunnel: Duplex, text: string): Promise<string> {
  const answer = new Promise<string>((resolve) => tunnel.once('data', (chunk: Buffer) => resolve(chunk.toString())));
  tunnel.write(text);
  return answer;
}

describe('NodeChannel tunnel sessions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tp-channel-'));
  let server: Http2SecureServer;
  let url: string;
  let channel: NodeChannel;
  let clientTls: { ca: Buffer; cert: Buffer; key: Buffer };
  let serverTls: { ca: string; cert: string; key: string };
  const sessions: ServerHttp2Session[] = [];

  beforeAll(async () => {
    const client = await ensureClusterTls(dir);
    serverTls = await ensureNodeServerTls(dir, 'node1', '127.0.0.1');
    server = echoAgent(serverTls, sessions);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    clientTls = { ca: readFileSync(client.ca), cert: readFileSync(client.cert), key: readFileSync(client.key) };
    channel = new NodeChannel('node1', url, clientTls, 3);
  });

  afterAll(async () => {
    channel.close();
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  async function echoThroughTunnel(text: string): Promise<string> {
    const tunnel = await dialThroughAgent(channel, '10.0.0.2', 49983);
    const answer = new Promise<string>((resolve) => tunnel.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    tunnel.write(text);
    const echoed = await answer;
    tunnel.destroy();
    return echoed;
  }

  it('opens a new connection after `streamsPerSession` tunnels; tunnels still open on the old one keep working', async () => {
    const held = await dialThroughAgent(channel, '10.0.0.2', 49983);
    for (let i = 0; i < 7; i += 1) expect(await echoThroughTunnel(`t${i}`)).toBe(`t${i}`);
    // 8 tunnels, 3 per connection: three connections; the first one still carries `held`.
    expect(sessions.length).toBe(3);
    const answer = new Promise<string>((resolve) => held.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    held.write('still here');
    expect(await answer).toBe('still here');
    held.destroy();
  });

  it('an agent that sends GOAWAY (stopping): tunnels open on its connection keep working, the next tunnel opens a new connection', async () => {
    const held = await dialThroughAgent(channel, '10.0.0.2', 49983);
    const before = sessions.length;
    for (const session of sessions) if (!session.closed) session.close();
    // The GOAWAY reaches the client: the next dial does not use the shutting connection.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await echoOnce(held, 'held after goaway')).toBe('held after goaway');
    const next = await dialThroughAgent(channel, '10.0.0.2', 49983);
    expect(await echoOnce(next, 'on a new connection')).toBe('on a new connection');
    expect(sessions.length).toBe(before + 1);
    held.destroy();
    next.destroy();
  });

  it('an agent that refuses connections (restarting) is waited for until it listens; past the wait the dial fails as unreachable', async () => {
    const port = await getFreePort();
    const restarting = new NodeChannel('node1', `https://127.0.0.1:${port}`, clientTls);
    const later: ServerHttp2Session[] = [];
    const agent = echoAgent(serverTls, later);
    try {
      const started = Date.now();
      const dialled = dialThroughAgent(restarting, '10.0.0.2', 49983, undefined, 5_000, 10_000);
      setTimeout(() => agent.listen(port, '127.0.0.1'), 700);
      const tunnel = await dialled;
      expect(Date.now() - started).toBeGreaterThanOrEqual(650);
      expect(await echoOnce(tunnel, 'new agent')).toBe('new agent');
      tunnel.destroy();
    } finally {
      restarting.close();
      for (const session of later) session.destroy();
      await new Promise((resolve) => agent.close(resolve));
    }
    const gone = new NodeChannel('node1', `https://127.0.0.1:${port}`, clientTls);
    try {
      const failure = await dialThroughAgent(gone, '10.0.0.2', 49983, undefined, 5_000, 400).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(NodeChannelError);
      expect((failure as NodeChannelError).code).toBe('unreachable');
      expect((failure as NodeChannelError).message).toMatch(/did not take connections/);
    } finally {
      gone.close();
    }
  });
});
