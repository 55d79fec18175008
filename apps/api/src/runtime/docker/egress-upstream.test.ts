import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkSocksReply,
  dialThroughUpstream,
  httpConnectRequest,
  parseConnectResponse,
  socksConnectRequest,
  socksGreeting,
  socksPasswordRequest,
  socksReplyLength,
  UpstreamDialError,
} from './egress-upstream.ts';
import { ConntrackReader, findOriginalDestination } from './original-destination.ts';
import { EgressTunnel, MAX_PENDING_PER_SANDBOX, tunnelDecision } from './egress-tunnel.ts';
import { DEFAULT_EGRESS_PROXY_PORTS } from './upstream-address.ts';
import { UpstreamAddressPolicy } from './upstream-address.ts';

describe('SOCKS5 client framing', () => {
  it('offers username/password only with credentials', () => {
    expect([...socksGreeting(true)]).toEqual([5, 1, 2]);
    expect([...socksGreeting(false)]).toEqual([5, 1, 0]);
  });

  it('frames RFC 1929 credentials with byte lengths and refuses oversized ones', () => {
    expect([...socksPasswordRequest('ab', 'pé')]).toEqual([1, 2, 0x61, 0x62, 3, 0x70, 0xc3, 0xa9]);
    expect(() => socksPasswordRequest('x'.repeat(256), '')).toThrow(UpstreamDialError);
    expect(() => socksPasswordRequest('', 'p')).toThrow(UpstreamDialError);
  });

  it('connects to IPv4, IPv6 and names (remote DNS)', () => {
    expect([...socksConnectRequest({ host: '198.18.60.10', port: 8080 })]).toEqual([5, 1, 0, 1, 198, 18, 60, 10, 0x1f, 0x90]);
    expect([...socksConnectRequest({ host: 'a.io', port: 443 })]).toEqual([5, 1, 0, 3, 4, 0x61, 0x2e, 0x69, 0x6f, 1, 0xbb]);
    const v6 = socksConnectRequest({ host: '2001:db8::1', port: 80 });
    expect(v6[3]).toBe(4);
    expect(v6.subarray(4, 20).toString('hex')).toBe('20010db8000000000000000000000001');
  });

  it('knows how long a reply is, and refuses a server that is not SOCKS5 or says no', () => {
    expect(socksReplyLength(Buffer.from([5, 0]))).toBe(5);
    expect(socksReplyLength(Buffer.from([5, 0, 0, 1, 0]))).toBe(10);
    expect(socksReplyLength(Buffer.from([5, 0, 0, 3, 7]))).toBe(4 + 1 + 7 + 2);
    expect(socksReplyLength(Buffer.from([5, 0, 0, 4, 0]))).toBe(22);
    expect(() => socksReplyLength(Buffer.from('HTTP/1.1 400'))).toThrow(/does not speak SOCKS5/);
    expect(() => socksReplyLength(Buffer.from([5, 0, 0, 9, 0]))).toThrow(/unknown address type/);
    expect(() => checkSocksReply(Buffer.from([5, 5, 0, 1, 0, 0, 0, 0, 0, 0]))).toThrow(/connection refused/);
    expect(() => checkSocksReply(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]))).not.toThrow();
  });
});

describe('HTTP CONNECT client framing', () => {
  it('sends CONNECT with Host and Basic Proxy-Authorization', () => {
    const text = httpConnectRequest({ host: 'dest.test', port: 443 }, 'user', 'p:ss').toString('latin1');
    expect(text).toBe(`CONNECT dest.test:443 HTTP/1.1\r\nHost: dest.test:443\r\nProxy-Authorization: Basic ${Buffer.from('user:p:ss').toString('base64')}\r\n\r\n`);
    expect(httpConnectRequest({ host: '2001:db8::1', port: 80 }).toString()).toMatch(/^CONNECT \[2001:db8::1\]:80 HTTP\/1\.1\r\n/);
  });

  it('never lets credentials or a destination inject header lines', () => {
    expect(() => httpConnectRequest({ host: 'a\r\nX: y', port: 1 })).toThrow(UpstreamDialError);
    expect(() => httpConnectRequest({ host: 'a', port: 1 }, 'u\r\nX-Evil: 1', 'p')).toThrow(UpstreamDialError);
  });

  it('waits for the whole head, keeps tunnel bytes after it, and refuses non-2xx, non-HTTP and oversized answers', () => {
    expect(parseConnectResponse(Buffer.from('HTTP/1.1 200 Connection established\r\n'))).toBeNull();
    expect(parseConnectResponse(Buffer.from('HTTP/1.1 200 OK\r\n\r\nSSH-2.0'))!.rest.toString()).toBe('SSH-2.0');
    expect(() => parseConnectResponse(Buffer.from('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n'))).toThrow(/407/);
    expect(() => parseConnectResponse(Buffer.from('\x05\x00garbage'))).toThrow(/does not speak HTTP/);
    expect(() => parseConnectResponse(Buffer.from(`HTTP/1.1 200 ${'x'.repeat(9000)}`))).toThrow(/oversized/);
  });
});

describe('dialing through an upstream', () => {
  const servers: net.Server[] = [];
  afterEach(() => {
    for (const server of servers.splice(0)) server.close();
  });

  async function serve(onConnection: (socket: net.Socket) => void): Promise<number> {
    const server = net.createServer(onConnection);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as net.AddressInfo).port;
  }

  it('gives up on a proxy that accepts and says nothing, within the deadline', async () => {
    const held: net.Socket[] = [];
    const port = await serve((socket) => void held.push(socket));
    const began = Date.now();
    await expect(dialThroughUpstream({ protocol: 'socks5', host: '127.0.0.1', port }, { host: '198.18.0.1', port: 80 }, { address: '127.0.0.1', deadlineMs: 300 })).rejects.toThrow(/within 300 ms/);
    expect(Date.now() - began).toBeLessThan(2000);
    for (const socket of held) socket.destroy();
  });

  it('refuses a proxy that picks a method it was not offered, and one that closes mid-handshake', async () => {
    const liar = await serve((socket) => socket.once('data', () => socket.write(Buffer.from([5, 0]))));
    await expect(dialThroughUpstream({ protocol: 'socks5', host: '127.0.0.1', port: liar, username: 'u', password: 'p' }, { host: '198.18.0.1', port: 80 }, { address: '127.0.0.1', deadlineMs: 2000 })).rejects.toThrow(/not offered/);
    const quitter = await serve((socket) => socket.once('data', () => socket.end()));
    await expect(dialThroughUpstream({ protocol: 'http', host: '127.0.0.1', port: quitter }, { host: '198.18.0.1', port: 80 }, { address: '127.0.0.1', deadlineMs: 2000 })).rejects.toThrow(/closed the connection/);
  });

  it('hands back the early bytes a CONNECT proxy sent past its head', async () => {
    const port = await serve((socket) => socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\n\r\nbanner')));
    const { socket, early } = await dialThroughUpstream({ protocol: 'http', host: '127.0.0.1', port }, { host: 'x.test', port: 22 }, { address: '127.0.0.1', deadlineMs: 2000 });
    expect(early.toString()).toBe('banner');
    socket.destroy();
  });
});

describe('original destinations from the conntrack table', () => {
  const table = [
    'ipv4     2 udp      17 20 src=172.27.0.5 dst=8.8.8.8 sport=5353 dport=53 src=8.8.8.8 dst=172.27.0.1 sport=53 dport=5353 mark=0 zone=0 use=2',
    'ipv4     2 tcp      6 431999 ESTABLISHED src=172.27.0.5 dst=198.18.61.2 sport=40001 dport=8080 src=172.27.0.1 dst=172.27.0.5 sport=39000 dport=40001 [ASSURED] mark=0 zone=0 use=2',
    'ipv4     2 tcp      6 117 SYN_RECV src=172.27.0.5 dst=198.18.61.9 sport=40002 dport=22 src=172.27.0.1 dst=172.27.0.5 sport=39000 dport=40002 mark=0 zone=0 use=2',
    'ipv4     2 tcp      6 117 SYN_SENT src=172.27.0.6 dst=1.1.1.1 sport=40001 dport=443 [UNREPLIED] src=1.1.1.1 dst=172.27.0.6 sport=443 dport=40001 mark=0 zone=0 use=2',
  ].join('\n');

  it('finds the entry of exactly this redirected connection', () => {
    expect(findOriginalDestination(table, '172.27.0.5', 40001, 39000)).toEqual({ address: '198.18.61.2', port: 8080 });
    expect(findOriginalDestination(table, '172.27.0.5', 40002, 39000)).toEqual({ address: '198.18.61.9', port: 22 });
    // Same peer port, another listener; another peer; a connection that was not redirected to us.
    expect(findOriginalDestination(table, '172.27.0.5', 40001, 39001)).toBeUndefined();
    expect(findOriginalDestination(table, '172.27.0.50', 40001, 39000)).toBeUndefined();
    expect(findOriginalDestination(table, '172.27.0.6', 40001, 443)).toBeUndefined();
  });
});

describe('tunnel decisions', () => {
  const open = { allow: [], deny: [], domains: [] };
  const at = (address: string, port = 80) => ({ address, port });

  it('applies the sandbox rules first: always-denied, allowed beats denied, denied refused', () => {
    expect(tunnelDecision(open, at('10.0.0.1'), undefined)).toHaveProperty('refused');
    expect(tunnelDecision({ ...open, allow: ['10.0.0.0/8'] }, at('10.0.0.1'), undefined)).toHaveProperty('refused');
    expect(tunnelDecision({ allow: ['198.18.61.2/32'], deny: ['0.0.0.0/0'], domains: [] }, at('198.18.61.2'), undefined)).toEqual({ target: { host: '198.18.61.2', port: 80 } });
    expect(tunnelDecision({ allow: [], deny: ['198.18.0.0/15'], domains: [] }, at('198.18.61.2'), undefined)).toHaveProperty('refused');
  });

  it('sends an allowed domain by name, and other names only when the sandbox denies nothing', () => {
    const onlyDomain = { allow: [], deny: ['0.0.0.0/0'], domains: ['api.example.com'] };
    expect(tunnelDecision(onlyDomain, at('198.18.61.2', 443), 'API.example.com.')).toEqual({ target: { host: 'api.example.com', port: 443 } });
    expect(tunnelDecision(onlyDomain, at('198.18.61.2', 443), 'evil.example.com')).toHaveProperty('refused');
    // Allowed by IP, but a Host naming something else must not steer the proxy elsewhere.
    expect(tunnelDecision({ ...onlyDomain, allow: ['198.18.61.2/32'] }, at('198.18.61.2'), 'evil.example.com')).toEqual({ target: { host: '198.18.61.2', port: 80 } });
    expect(tunnelDecision(open, at('198.18.61.2'), 'dest.standin.test')).toEqual({ target: { host: 'dest.standin.test', port: 80 } });
  });
});

/** A policy whose cluster is the given addresses only (not this machine's: tests dial loopback proxies). */
const policyOf = (allowedCidrs: string[], ports = DEFAULT_EGRESS_PROXY_PORTS, own: string[] = []): UpstreamAddressPolicy =>
  new UpstreamAddressPolicy({ allowedCidrs, ports, cluster: { includes: async (address) => own.includes(address) } });

describe('upstream addresses', () => {
  it('refuses private, loopback and link-local proxies unless the operator allows the range', async () => {
    const policy = policyOf(['10.9.0.0/16']);
    await expect(policy.resolve('127.0.0.1', 1080)).rejects.toThrow(/TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS/);
    await expect(policy.resolve('169.254.169.254', 80)).rejects.toThrow(UpstreamDialError);
    await expect(policy.resolve('10.8.0.1', 1080)).rejects.toThrow(UpstreamDialError);
    expect(await policy.resolve('10.9.1.2', 1080)).toBe('10.9.1.2');
    expect(await policy.resolve('198.18.60.2', 3128)).toBe('198.18.60.2');
  });

  it('dials proxy ports only', async () => {
    const policy = policyOf([]);
    for (const port of [22, 25, 5432, 6379, 2376, 65535]) {
      await expect(policy.resolve('198.18.60.2', port)).rejects.toThrow(/is not an egress proxy port .*TIDEPOOL_EGRESS_PROXY_PORTS/);
    }
    for (const port of DEFAULT_EGRESS_PROXY_PORTS) expect(await policy.resolve('198.18.60.2', port)).toBe('198.18.60.2');
    await expect(policyOf([], [9050]).resolve('198.18.60.2', 1080)).rejects.toThrow(UpstreamDialError);
    expect(await policyOf([], [9050]).resolve('198.18.60.2', 9050)).toBe('198.18.60.2');
  });

  it("refuses the cluster's own addresses, even in a range the operator allows", async () => {
    const policy = policyOf(['10.9.0.0/16'], DEFAULT_EGRESS_PROXY_PORTS, ['198.18.60.9', '10.9.0.5']);
    await expect(policy.resolve('198.18.60.9', 1080)).rejects.toThrow(/one of the platform's own/);
    await expect(policy.resolve('10.9.0.5', 3128)).rejects.toThrow(/one of the platform's own/);
    expect(await policy.resolve('10.9.0.6', 3128)).toBe('10.9.0.6');
  });
});

describe('egress tunnel on loopback (original destinations stubbed)', () => {
  it('closes connections past the per-sandbox pending cap at once, and the rest at the deadline, reporting once', async () => {
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const failures: string[] = [];
    const tunnel = new EgressTunnel(pino({ level: 'silent' }), {
      addresses: policyOf(['127.0.0.0/8'], [(silent.address() as net.AddressInfo).port]),
      deadlineMs: 4000,
      onFailure: (sandboxId, message) => failures.push(`${sandboxId}: ${message}`),
      lookup: async () => ({ address: '198.18.0.1', port: 9999 }),
    });
    const port = await tunnel.listen('127.0.0.1');
    tunnel.setRoute('127.0.0.1', { sandboxId: 'sbx1', upstream: { protocol: 'socks5', host: '127.0.0.1', port: (silent.address() as net.AddressInfo).port }, allow: [], deny: [], domains: [] });
    const closedAfter = (): Promise<number> =>
      new Promise((resolve) => {
        const began = Date.now();
        const client = net.connect(port, '127.0.0.1');
        client.on('error', () => undefined);
        client.on('close', () => resolve(Date.now() - began));
      });
    const first = Array.from({ length: MAX_PENDING_PER_SANDBOX }, closedAfter);
    // Every one of them is waiting on the silent proxy: the cap is reached.
    while (held.length < MAX_PENDING_PER_SANDBOX) await new Promise((resolve) => setTimeout(resolve, 20));
    const extra = await closedAfter();
    expect(extra).toBeLessThan(2000);
    const times = await Promise.all(first);
    expect(Math.min(...times)).toBeGreaterThanOrEqual(3900);
    expect(Math.max(...times)).toBeLessThan(15_000);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(/^sbx1: /);
    // After the cap clears, and for an address with no route, nothing is left pending or dialed.
    tunnel.dropSandbox('sbx1');
    expect(await closedAfter()).toBeLessThan(1000);
    tunnel.close();
    for (const socket of held) socket.destroy();
    silent.close();
  }, 40_000);
});

describe('egress tunnel dial checks', () => {
  it("never dials a stored proxy on a port that is no proxy port or at one of the cluster's own addresses", async () => {
    const dialled: net.Socket[] = [];
    const listener = net.createServer((socket) => void dialled.push(socket));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const listenerPort = (listener.address() as net.AddressInfo).port;
    const failures: string[] = [];
    // The listener's port is a proxy port, and 127.0.0.2 (where it is not) one of the cluster's own addresses.
    const tunnel = new EgressTunnel(pino({ level: 'silent' }), {
      addresses: policyOf(['127.0.0.0/8'], [listenerPort], ['127.0.0.2']),
      onFailure: (sandboxId, message) => failures.push(`${sandboxId}: ${message}`),
      lookup: async () => ({ address: '198.18.0.1', port: 9999 }),
    });
    const port = await tunnel.listen('127.0.0.1');
    const closed = (): Promise<void> =>
      new Promise((resolve) => {
        const client = net.connect(port, '127.0.0.1');
        client.on('error', () => undefined);
        client.on('close', () => resolve());
      });
    // A record made before the port rule (or by hand): its proxy on another port of the same host.
    tunnel.setRoute('127.0.0.1', { sandboxId: 'sbx-port', upstream: { protocol: 'socks5', host: '127.0.0.1', port: listenerPort + 1 }, allow: [], deny: [], domains: [] });
    await closed();
    tunnel.dropSandbox('sbx-port');
    tunnel.setRoute('127.0.0.1', { sandboxId: 'sbx-own', upstream: { protocol: 'socks5', host: '127.0.0.2', port: listenerPort }, allow: [], deny: [], domains: [] });
    await closed();
    expect(failures).toEqual([
      expect.stringMatching(/^sbx-port: .*is not an egress proxy port/),
      expect.stringMatching(/^sbx-own: .*one of the platform's own/),
    ]);
    expect(dialled).toHaveLength(0);
    tunnel.close();
    listener.close();
  });
});

describe('conntrack reader', () => {
  it('answers many concurrent lookups from a table file, and rejects when it cannot be read', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tp-conntrack-')), 'nf_conntrack');
    const line = (port: number) => `ipv4     2 tcp      6 117 SYN_RECV src=172.27.0.5 dst=198.18.61.${port % 250} sport=${port} dport=22 src=172.27.0.1 dst=172.27.0.5 sport=39000 dport=${port} mark=0 zone=0 use=2`;
    writeFileSync(file, Array.from({ length: 200 }, (_, i) => line(40000 + i)).join('\n'));
    const reader = new ConntrackReader(file);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => reader.lookup('172.27.0.5', 40000 + i, 39000)));
    expect(answers.every((a, i) => a?.address === `198.18.61.${(40000 + i) % 250}` && a.port === 22)).toBe(true);
    expect(await reader.lookup('172.27.0.5', 1, 39000)).toBeUndefined();
    await expect(new ConntrackReader(join(file, 'missing')).lookup('172.27.0.5', 1, 1)).rejects.toThrow();
  });
});

describe('abandoned dials', () => {
  it('stop at once when the connection they were for goes away', async () => {
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => {
      held.push(socket.resume());
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    const abort = new AbortController();
    const began = Date.now();
    const dial = dialThroughUpstream({ protocol: 'socks5', host: '127.0.0.1', port }, { host: '198.18.0.1', port: 80 }, { address: '127.0.0.1', deadlineMs: 10_000, signal: abort.signal });
    while (held.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    abort.abort();
    await expect(dial).rejects.toThrow(/abandoned/);
    expect(Date.now() - began).toBeLessThan(3000);
    // The proxy sees its connection closed too.
    await new Promise<void>((resolve) => (held[0]!.destroyed ? resolve() : held[0]!.once('close', () => resolve())));
    silent.close();
  }, 15_000);
});
