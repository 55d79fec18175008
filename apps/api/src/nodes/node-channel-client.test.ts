import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureClusterTls, ensureNodeServerTls } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeChannel } from './node-channel-client.ts';
import { dialThroughAgent } from './tunnel-dial.ts';

/** An agent stand-in: answers every CONNECT with 200 and echoes the tunnel's bytes; counts its HTTP/2 sessions. */
describe('NodeChannel tunnel sessions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tp-channel-'));
  let server: Http2SecureServer;
  let url: string;
  let channel: NodeChannel;
  const sessions: ServerHttp2Session[] = [];

  beforeAll(async () => {
    const client = await ensureClusterTls(dir);
    const serverTls = await ensureNodeServerTls(dir, 'node1', '127.0.0.1');
    server = createSecureServer({ ca: readFileSync(serverTls.ca), cert: readFileSync(serverTls.cert), key: readFileSync(serverTls.key), requestCert: true });
    server.on('session', (session) => sessions.push(session));
    server.on('stream', (stream) => {
      stream.respond({ ':status': 200 });
      stream.pipe(stream);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    channel = new NodeChannel('node1', url, { ca: readFileSync(client.ca), cert: readFileSync(client.cert), key: readFileSync(client.key) }, 3);
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
});
