import { describe, expect, it } from 'vitest';
import { RUNTIME_METHODS, schemaProblem } from './node-rpc-methods.ts';

const egress = (transforms: Record<string, unknown>) => ({ allow: [], deny: [], transforms });

describe('the node call table', () => {
  it('refuses record keys outside their pattern (image labels, transform domains)', () => {
    expect(schemaProblem(RUNTIME_METHODS.commit.args, ['c1', 'tidepool/x:1', { 'dev.tidepool.template': 'base' }])).toBeUndefined();
    expect(schemaProblem(RUNTIME_METHODS.commit.args, ['c1', 'tidepool/x:1', { 'bad key\n': 'x' }])).toBeDefined();
    const rule = [{ transform: { headers: { 'x-a': '1' } } }];
    expect(schemaProblem(RUNTIME_METHODS.applyEgress.args, ['isb_1', '10.0.0.2', egress({ '*.example.com': rule })])).toBeUndefined();
    expect(schemaProblem(RUNTIME_METHODS.applyEgress.args, ['isb_1', '10.0.0.2', egress({ 'example.com/evil path': rule })])).toBeDefined();
  });
});
