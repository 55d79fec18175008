import { describe, expect, it } from 'vitest';
import { isCidrOrIp, validateNetwork } from './network-rules.ts';

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
});
