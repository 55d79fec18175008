import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { domainAllowed, httpHost, tlsServerName } from './egress-proxy.ts';

/** The first bytes a TLS client sends (its ClientHello), captured on a local socket. */
async function clientHello(servername: string | undefined): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const received = new Promise<Buffer>((resolve) => server.once('connection', (socket) => socket.once('data', (data: Buffer) => {
    resolve(data);
    socket.destroy();
  })));
  const client = tls.connect({ port: (server.address() as net.AddressInfo).port, host: '127.0.0.1', servername, rejectUnauthorized: false });
  client.on('error', () => undefined);
  const hello = await received;
  client.destroy();
  server.close();
  return hello;
}

describe('egress proxy decisions', () => {
  it('matches exact names and *. wildcards (below the apex only), case-insensitively', () => {
    expect(domainAllowed('Example.COM.', ['example.com'])).toBe(true);
    expect(domainAllowed('www.example.com', ['example.com'])).toBe(false);
    expect(domainAllowed('a.b.example.com', ['*.example.com'])).toBe(true);
    expect(domainAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(domainAllowed('badexample.com', ['*.example.com'])).toBe(false);
    expect(domainAllowed('anything.org', ['*'])).toBe(true);
  });

  it('reads the Host header once the request head is complete', () => {
    expect(httpHost(Buffer.from('GET / HTTP/1.1\r\nHost: api.example.com:8080\r\n'))).toBeNull();
    expect(httpHost(Buffer.from('GET / HTTP/1.1\r\nUser-Agent: x\r\nhost: api.example.com:8080\r\n\r\n'))).toBe('api.example.com');
    expect(httpHost(Buffer.from('GET / HTTP/1.0\r\n\r\n'))).toBeUndefined();
  });

  it('reads the SNI of a real ClientHello, waits for a complete record, and rejects what is not TLS', async () => {
    const hello = await clientHello('secure.example.com');
    expect(tlsServerName(hello)).toBe('secure.example.com');
    expect(tlsServerName(hello.subarray(0, 40))).toBeNull();
    expect(tlsServerName(await clientHello(undefined))).toBeUndefined();
    expect(tlsServerName(Buffer.from('GET / HTTP/1.1\r\n\r\n'))).toBeUndefined();
  });
});
