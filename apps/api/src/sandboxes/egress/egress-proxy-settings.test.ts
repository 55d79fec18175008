import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PlatformError } from '../../errors.ts';
import { DEFAULT_EGRESS_PROXY_PORTS } from '../../runtime/docker/upstream-address.ts';
import { UpstreamAddressPolicy } from '../../runtime/docker/upstream-address.ts';
import { SecretCipher } from '../../secrets/secret-crypto.ts';
import { EgressProxyGate } from './egress-proxy-gate.ts';
import { egressProxyView, parseEgressProxy, upstreamOf } from './egress-proxy-settings.ts';
import { egressUpdate } from './network-rules.ts';

const refused = (raw: unknown): string => {
  try {
    parseEgressProxy(raw);
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    expect((error as PlatformError).kind).toBe('invalid');
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(raw)}`);
};

describe('network.egressProxy validation', () => {
  it('reads host:port as SOCKS5 (the SDK shape) and socks5:// or http:// schemes', () => {
    expect(parseEgressProxy({ address: 'proxy.example.com:1080', username: 'u', password: 'p' })).toEqual({ address: 'proxy.example.com:1080', protocol: 'socks5', host: 'proxy.example.com', port: 1080, username: 'u', password: 'p' });
    expect(parseEgressProxy({ address: 'HTTP://198.18.60.2:3128/' })).toMatchObject({ protocol: 'http', host: '198.18.60.2', port: 3128 });
    expect(parseEgressProxy({ address: 'socks5://[2001:db8::1]:1080' })).toMatchObject({ protocol: 'socks5', host: '2001:db8::1', port: 1080 });
    expect(parseEgressProxy(null)).toBeUndefined();
    expect(parseEgressProxy(undefined)).toBeUndefined();
  });

  it('refuses other schemes, missing or bad ports, paths and credentials in the address', () => {
    expect(refused({ address: 'https://p.example.com:443' })).toMatch(/https:\/\/ is not supported/);
    expect(refused({ address: 'socks4://p.example.com:1080' })).toMatch(/socks4/);
    expect(refused({ address: 'p.example.com' })).toMatch(/host:port/);
    expect(refused({ address: 'p.example.com:0' })).toMatch(/out of range/);
    expect(refused({ address: 'p.example.com:70000' })).toMatch(/out of range/);
    expect(refused({ address: 'http://u:p@p.example.com:3128' })).toMatch(/username and password/);
    expect(refused({ address: 'http://p.example.com:3128/path' })).toMatch(/no path/);
    expect(refused({ address: 'bad_host!:1080' })).toMatch(/not a host name/);
    expect(refused({ address: '[not-v6]:1080' })).toMatch(/host:port|not a host/);
    expect(refused({ address: '' })).toMatch(/address is required/);
    expect(refused('socks5://p:1')).toMatch(/must be an object/);
    expect(refused({ address: 'p.example.com:1080', extra: 1 })).toMatch(/unknown field "extra"/);
  });

  it('refuses credentials with CR/LF/NUL, oversized ones, a password without a username, ":" in an HTTP username', () => {
    expect(refused({ address: 'p.example.com:1080', username: 'u\r\nX-Evil: 1', password: 'p' })).toMatch(/control characters/);
    expect(refused({ address: 'p.example.com:1080', username: 'u', password: 'p\n' })).toMatch(/control characters/);
    expect(refused({ address: 'p.example.com:1080', username: 'u', password: 'x'.repeat(256) })).toMatch(/255 bytes/);
    expect(refused({ address: 'p.example.com:1080', username: 'é'.repeat(128) })).toMatch(/255 bytes/);
    expect(refused({ address: 'p.example.com:1080', password: 'p' })).toMatch(/only valid together with username/);
    expect(refused({ address: 'p.example.com:1080', username: 5 })).toMatch(/must be a string/);
    expect(refused({ address: 'http://p.example.com:3128', username: 'a:b' })).toMatch(/cannot contain ":"/);
  });
});

describe('admitting a proxy', () => {
  const cipher = new SecretCipher(randomBytes(32));
  const addresses = new UpstreamAddressPolicy({ ports: DEFAULT_EGRESS_PROXY_PORTS, cluster: { includes: async (address) => address === '198.18.60.7' } });
  const gate = (problem?: string) => new EgressProxyGate({ cipher: () => cipher, addresses, problem: async () => problem });

  it('seals the password, shows address and username only, and opens it for the dialer', async () => {
    const stored = await gate().admit(parseEgressProxy({ address: '198.18.60.3:1080', username: 'alice', password: 's3cret-pw' })!);
    expect(JSON.stringify(stored)).not.toContain('s3cret-pw');
    expect(egressProxyView(stored)).toEqual({ address: '198.18.60.3:1080', username: 'alice' });
    expect(upstreamOf(stored, (sealed) => gate().open(sealed))).toEqual({ protocol: 'socks5', host: '198.18.60.3', port: 1080, username: 'alice', password: 's3cret-pw' });
    const otherKey = new EgressProxyGate({ cipher: () => new SecretCipher(randomBytes(32)), addresses, problem: async () => undefined });
    expect(() => otherKey.open(stored.sealedPassword!)).toThrow(/does not open/);
  });

  it('refuses (400) a proxy in a private range and an install that cannot tunnel', async () => {
    await expect(gate().admit(parseEgressProxy({ address: '127.0.0.1:1080' })!)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/private, loopback or link-local/) });
    await expect(gate('no conntrack').admit(parseEgressProxy({ address: '198.18.60.3:1080' })!)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/not supported on this install: no conntrack/) });
  });

  it("refuses (400) a proxy on a port that is no proxy port, or at one of the cluster's own addresses", async () => {
    for (const address of ['198.18.60.3:22', 'http://198.18.60.3:5432', '198.18.60.3:2376']) {
      await expect(gate().admit(parseEgressProxy({ address })!)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/is not an egress proxy port/) });
    }
    await expect(gate().admit(parseEgressProxy({ address: '198.18.60.7:1080' })!)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(/one of the platform's own/) });
  });

  it('an update without egressProxy clears it; with one it replaces it', async () => {
    const stored = await gate().admit(parseEgressProxy({ address: '198.18.60.3:1080' })!);
    const current = { allowOut: [], denyOut: [], egressProxy: stored };
    expect(egressUpdate(current, {})).not.toHaveProperty('egressProxy');
    expect(egressUpdate({}, { denyOut: ['198.18.0.0/15'] }, stored)).toMatchObject({ denyOut: ['198.18.0.0/15'], egressProxy: stored });
  });
});
