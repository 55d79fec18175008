import { describe, expect, it } from 'vitest';
import { allowedDomains, egressPolicy, egressUpdate, isCidrOrIp, validateNetwork } from './network-rules.ts';

describe('network rules', () => {
  it('tells CIDRs and IPs from everything else', () => {
    for (const ok of ['10.0.0.0/8', '1.1.1.1', '0.0.0.0/0', '::1', '2001:db8::/32']) expect(isCidrOrIp(ok)).toBe(true);
    for (const bad of ['example.com', '10.0.0.0/33', '0.0.0.0', '0.0.0.0/8', '1.2.3.4/x']) expect(isCidrOrIp(bad)).toBe(false);
  });

  it('follows the reference rules for allow and deny lists', () => {
    expect(() => validateNetwork({ denyOut: ['example.com'] })).toThrow(/invalid denied CIDR/);
    expect(() => validateNetwork({ allowOut: ['*.example.com'] })).toThrow(/ALL_TRAFFIC/);
    expect(() => validateNetwork({ allowOut: ['*.example.com', '1.1.1.1'], denyOut: ['0.0.0.0/0'] })).not.toThrow();
    expect(() => validateNetwork({ maskRequestHost: 'bad host' })).toThrow(/maskRequestHost/);
  });

  it('turns allow and deny lists into IPv4 firewall rules (bare IPs as /32, domains and IPv6 left out)', () => {
    expect(egressPolicy({ allowOut: ['1.2.3.4', '*.example.com', '10.0.0.0/8', '::1'], denyOut: ['0.0.0.0/0'] })).toEqual({ allow: ['1.2.3.4/32', '10.0.0.0/8'], deny: ['0.0.0.0/0'], domains: ['*.example.com'] });
    expect(egressPolicy({})).toEqual({ allow: [], deny: [], domains: [] });
    expect(allowedDomains({ allowOut: ['Example.COM', '1.1.1.1', '*.x.org'] })).toEqual(['example.com', '*.x.org']);
  });

  it('replaces the rules on update: omitted lists are cleared, allow_internet_access=false denies everything else', () => {
    const current = { allowPublicTraffic: false, allowOut: ['1.1.1.1'], denyOut: ['2.0.0.0/8'], maskRequestHost: 'h' };
    expect(egressUpdate(current, {})).toEqual({ allowPublicTraffic: false, allowOut: undefined, denyOut: undefined, maskRequestHost: 'h' });
    expect(egressUpdate(current, { allowOut: ['3.3.3.3'], allow_internet_access: false })).toMatchObject({ allowOut: ['3.3.3.3'], denyOut: ['0.0.0.0/0'] });
    expect(() => egressUpdate(current, { allowOut: ['example.com'] })).toThrow(/ALL_TRAFFIC/);
  });

  it('refuses what it does not implement (header rules), a malformed egress proxy, and the envd port as an HTTPS port', () => {
    expect(() => validateNetwork({ egressProxy: { address: 'https://p.example.com:1080' } })).toThrow(/egressProxy: scheme https/);
    expect(() => validateNetwork({ egressProxy: { address: 'p.example.com:1080', username: 'u', password: 'p' } })).not.toThrow();
    expect(() => validateNetwork({ rules: { 'x.com': [] } })).toThrow(/rules is not supported/);
    expect(() => validateNetwork({ rules: 'x' })).toThrow(/rules is not supported/);
    expect(() => validateNetwork({ egressProxy: null, rules: {} })).not.toThrow();
    expect(() => validateNetwork({ httpsPorts: [8443, 49983] })).toThrow(/envd port 49983/);
    expect(() => validateNetwork({ httpsPorts: [8443] })).not.toThrow();
    const current = { httpsPorts: [8443], allowOut: ['1.1.1.1'] };
    expect(egressUpdate(current, {}).httpsPorts).toEqual([8443]);
  });
});
