import { describe, expect, it } from 'vitest';
import { CidrPolicy } from './egress-cidr-policy.ts';

describe('CIDR policy at the egress proxy', () => {
  it('lets allowed CIDRs beat denied ones and allows the rest', () => {
    const policy = new CidrPolicy({ allow: ['198.18.1.2/32'], deny: ['198.18.0.0/15'] });
    expect(policy.allows('198.18.1.2')).toBe(true);
    expect(policy.allows('198.18.1.3')).toBe(false);
    expect(policy.allows('203.0.113.9')).toBe(true);
    expect(new CidrPolicy({ allow: [], deny: ['0.0.0.0/0'] }).allows('203.0.113.9')).toBe(false);
    expect(policy.allows('::1')).toBe(false);
  });
});
