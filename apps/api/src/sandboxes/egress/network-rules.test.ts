import { describe, expect, it } from 'vitest';
import { allowedDomains, egressPolicy, egressUpdate, isCidrOrIp, validateNetwork } from './network-rules.ts';

describe('network rules', () => {
  it('tells CIDRs and IPs from everything else', () => {
    for (const ok of ['10.0.0.0/8', '1.1.1.1', '0.0.0.0/0', '::1', '2001:db8::/32']) expect(isCidrOrIp(ok)).toBe(true);
    for (const bad of ['example.com', '10.0.0.0/33', '0.0.0.0', '0.0.0.0/8', '1.2.3.4/x', 'fe80::1%eth0', 'fe80::%1/64', '::/129']) expect(isCidrOrIp(bad)).toBe(false);
  });

  it('follows the reference rules for allow and deny lists', () => {
    expect(() => validateNetwork({ denyOut: ['example.com'] })).toThrow(/invalid denied CIDR/);
    expect(() => validateNetwork({ denyOut: ['fe80::1%eth0'] })).toThrow(/invalid denied CIDR/);
    expect(() => validateNetwork({ allowOut: ['fe80::1%eth0'], denyOut: ['0.0.0.0/0'] })).toThrow(/invalid allowed entry/);
    expect(() => validateNetwork({ allowOut: ['*.example.com'] })).toThrow(/ALL_TRAFFIC/);
    expect(() => validateNetwork({ allowOut: ['*.example.com', '1.1.1.1'], denyOut: ['0.0.0.0/0'] })).not.toThrow();
    expect(() => validateNetwork({ maskRequestHost: 'bad host' })).toThrow(/maskRequestHost/);
  });

  it('turns allow and deny lists into firewall rules, IPv4 and IPv6 (bare IPs as /32 or /128, domains left out)', () => {
    expect(egressPolicy({ allowOut: ['1.2.3.4', '*.example.com', '10.0.0.0/8', '::1'], denyOut: ['0.0.0.0/0'] })).toEqual({ allow: ['1.2.3.4/32', '10.0.0.0/8', '::1/128'], deny: ['0.0.0.0/0'], domains: ['*.example.com'] });
    expect(egressPolicy({})).toEqual({ allow: [], deny: [], domains: [] });
    expect(allowedDomains({ allowOut: ['Example.COM', '1.1.1.1', '*.x.org'] })).toEqual(['example.com', '*.x.org']);
  });

  it('replaces the rules on update: omitted lists are cleared, allow_internet_access=false denies everything else', () => {
    const current = { allowPublicTraffic: false, allowOut: ['1.1.1.1'], denyOut: ['2.0.0.0/8'], maskRequestHost: 'h' };
    expect(egressUpdate(current, {})).toEqual({ allowPublicTraffic: false, allowOut: undefined, denyOut: undefined, maskRequestHost: 'h' });
    expect(egressUpdate(current, { allowOut: ['3.3.3.3'], allow_internet_access: false })).toMatchObject({ allowOut: ['3.3.3.3'], denyOut: ['0.0.0.0/0'] });
    expect(() => egressUpdate(current, { allowOut: ['example.com'] })).toThrow(/ALL_TRAFFIC/);
  });

  it('checks rules and the egress proxy, and refuses the envd port as an HTTPS port', () => {
    expect(() => validateNetwork({ egressProxy: { address: 'https://p.example.com:1080' } })).toThrow(/egressProxy: scheme https/);
    expect(() => validateNetwork({ egressProxy: { address: 'p.example.com:1080', username: 'u', password: 'p' } })).not.toThrow();
    expect(() => validateNetwork({ rules: { 'x.com': [] } })).not.toThrow();
    expect(() => validateNetwork({ rules: 'x' })).toThrow(/network.rules must be an object/);
    const rules = { 'x.com': [{ transform: { headers: { A: 'b' } } }] };
    expect(() => validateNetwork({ rules, egressProxy: { address: 'p.example.com:1080' } })).toThrow(/cannot be combined with network.egressProxy/);
    expect(() => validateNetwork({ egressProxy: null, rules: {} })).not.toThrow();
    expect(() => validateNetwork({ httpsPorts: [8443, 49983] })).toThrow(/envd port 49983/);
    expect(() => validateNetwork({ httpsPorts: [8443] })).not.toThrow();
    const current = { httpsPorts: [8443], allowOut: ['1.1.1.1'] };
    expect(egressUpdate(current, {}).httpsPorts).toEqual([8443]);
  });

  it('replaces rules on update (omitted: cleared) and hands them to the egress policy', () => {
    const rules = { 'API.x.com': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.tok}' } } }] };
    const updated = egressUpdate({}, { rules });
    expect(updated.rules).toEqual({ 'api.x.com': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.tok}' } } }] });
    expect(egressPolicy(updated).transforms).toEqual(updated.rules);
    expect(egressUpdate(updated, {})).not.toHaveProperty('rules');
    expect(() => egressUpdate({}, { rules: { '10.0.0.0/8': [] } })).toThrow(/domain names only/);
  });
});
