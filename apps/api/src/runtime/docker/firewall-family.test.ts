import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ALWAYS_DENIED_V6, familyPolicy, isOfFamily } from './firewall-family.ts';

describe('firewall families', () => {
  it('splits a policy by family; ALL_TRAFFIC (0.0.0.0/0) denies IPv6 as ::/0', () => {
    const policy = { allow: ['1.1.1.1/32', '2001:2::/48'], deny: ['0.0.0.0/0', '2001:db8::/32'], domains: ['example.com'] };
    expect(familyPolicy('ipv4', policy)).toEqual({ allow: ['1.1.1.1/32'], deny: ['0.0.0.0/0'], domains: ['example.com'] });
    expect(familyPolicy('ipv6', policy)).toEqual({ allow: ['2001:2::/48'], deny: ['2001:db8::/32', '::/0'], domains: ['example.com'] });
    expect(familyPolicy('ipv6', { allow: [], deny: ['::/0', '0.0.0.0/0'] }).deny).toEqual(['::/0']);
    expect(familyPolicy('ipv6', { allow: [], deny: ['10.0.0.0/8'] }).deny).toEqual([]);
    expect(isOfFamily('ipv6', '::/0')).toBe(true);
    expect(isOfFamily('ipv4', '::/0')).toBe(false);
  });

  it('always denies loopback, ULA, link-local and NAT64 forms of private IPv4, not global unicast', () => {
    const denied = new BlockList();
    for (const cidr of ALWAYS_DENIED_V6) {
      const [address, bits] = cidr.split('/');
      denied.addSubnet(address!, Number(bits), 'ipv6');
    }
    for (const address of ['::1', 'fd00:7d:1::2', 'fe80::1', '::ffff:10.0.0.1', '64:ff9b::10.1.2.3', '64:ff9b::169.254.169.254', '64:ff9b::192.168.1.1', '64:ff9b::172.20.0.1', '64:ff9b::127.0.0.1', '64:ff9b::100.64.0.1']) {
      expect(denied.check(address, 'ipv6'), address).toBe(true);
    }
    for (const address of ['2001:2::1', '2606:4700::1111', '64:ff9b::8.8.8.8']) expect(denied.check(address, 'ipv6'), address).toBe(false);
  });
});
