import net from 'node:net';
import tls from 'node:tls';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { EgressProxy, deniedDestination, domainAllowed, egressNameResolver, httpHost, tlsServerName } from './egress-proxy.ts';

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

describe('egress proxy destinations', () => {
  it('never dials the unspecified address, loopback, private ranges or their IPv6 spellings', () => {
    for (const address of ['0.0.0.0', '0.1.2.3', '127.0.0.1', '10.1.2.3', '169.254.169.254', '192.168.0.1', '::', '::1', '::ffff:127.0.0.1', '::ffff:0.0.0.0', '::ffff:10.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1', 'fe80::1', 'fc00::1', '64:ff9b::7f00:1', 'localhost', '']) {
      expect(deniedDestination(address), address).toBe(true);
    }
    for (const address of ['93.184.216.34', '1.1.1.1', '198.18.0.7', '2606:4700:4700::1111']) expect(deniedDestination(address), address).toBe(false);
  });

  const realResolve = egressNameResolver.resolve;
  afterEach(() => {
    egressNameResolver.resolve = realResolve;
  });

  it('opens the allowed-CIDR ports only with an original-destination lookup, and closes what it cannot relay there', async () => {
    const without = new EgressProxy(pino({ level: 'silent' }));
    try {
      expect(Object.keys(await without.listen('127.0.0.1')).sort()).toEqual(['http', 'tls']);
    } finally {
      without.close();
    }
    const lines: { msg: string }[] = [];
    const answers: Array<() => Promise<{ address: string; port: number } | undefined>> = [
      async () => ({ address: '127.0.0.1', port: 80 }), // a denied range: never dialled
      async () => undefined, // no conntrack entry
      async () => ({ address: '198.18.0.9', port: 443 }), // not the port this listener serves
      async () => {
        throw new Error('EACCES');
      },
    ];
    const proxy = new EgressProxy(pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) }));
    try {
      const lookups: Array<[string, number]> = [];
      const ports = await proxy.listen('127.0.0.1', async (peer, _peerPort, local) => {
        lookups.push([peer, local]);
        return answers[lookups.length - 1]!();
      });
      expect(ports.allowedHttp).toBeGreaterThan(0);
      for (let i = 0; i < answers.length; i++) {
        const client = net.connect(ports.allowedHttp!, '127.0.0.1');
        client.on('error', () => undefined);
        await new Promise<void>((resolve) => client.on('close', () => resolve()));
      }
      expect(lookups).toEqual(Array(4).fill(['127.0.0.1', ports.allowedHttp]));
      expect(lines.filter((l) => l.msg.startsWith('egress connection refused')).map((l) => l.msg)).toEqual([
        ...Array(3).fill('egress connection refused: its original destination is unknown or denied'),
        'egress connection refused: the conntrack table cannot be read',
      ]);
    } finally {
      proxy.close();
    }
  });

  it('refuses a name that resolves to 0.0.0.0 (it would reach the host itself)', async () => {
    const lines: { msg: string; addresses?: string[] }[] = [];
    const proxy = new EgressProxy(pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) }));
    try {
      const { http } = await proxy.listen('127.0.0.1');
      proxy.setDomains('127.0.0.1', ['zero.test']);
      egressNameResolver.resolve = async () => ['0.0.0.0'];
      const client = net.connect(http, '127.0.0.1');
      const closed = new Promise<void>((resolve) => client.on('close', () => resolve()));
      client.on('error', () => undefined);
      client.write('GET / HTTP/1.1\r\nHost: zero.test\r\n\r\n');
      await closed;
      expect(lines.find((l) => l.msg.startsWith('egress connection refused'))).toMatchObject({ msg: 'egress connection refused: name resolves into a denied range', addresses: ['0.0.0.0'] });
    } finally {
      proxy.close();
    }
  });
});
