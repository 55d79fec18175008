import { describe, expect, it } from 'vitest';
import { checkTrafficToken, mayAutoResume, tokensEqual } from './access-checks.ts';
import type { RoutableSandbox } from './sandbox-directory.ts';
import { applyHostMask, stripHopByHop } from './upstream-headers.ts';

describe('stripHopByHop', () => {
  it('drops hop-by-hop headers and those named in Connection, keeping the rest verbatim', () => {
    const raw = [
      'Host', 'h', 'Connection', 'keep-alive, X-Drop', 'Keep-Alive', 'timeout=5', 'Transfer-Encoding', 'chunked',
      'X-Drop', '1', 'X-Access-Token', 't', 'Authorization', 'Basic cm9vdDo=', 'Connect-Timeout-Ms', '60000',
      'TE', 'trailers', 'Upgrade', 'h2c', 'Expect', '100-continue', 'X-Keep', 'a', 'X-Keep', 'b',
    ];
    expect(stripHopByHop(raw)).toEqual([
      'Host', 'h', 'X-Access-Token', 't', 'Authorization', 'Basic cm9vdDo=', 'Connect-Timeout-Ms', '60000', 'X-Keep', 'a', 'X-Keep', 'b',
    ]);
  });
});

describe('applyHostMask', () => {
  it('replaces Host with the mask and keeps the original in X-Forwarded-Host', () => {
    expect(applyHostMask(['Host', '8000-abc.d', 'X-Forwarded-Host', 'spoof', 'A', '1'], 'localhost:${PORT}', 8000)).toEqual([
      'Host', 'localhost:8000', 'A', '1', 'X-Forwarded-Host', '8000-abc.d',
    ]);
  });
  it('is a no-op without a mask', () => {
    const raw = ['Host', 'x'];
    expect(applyHostMask(raw, undefined, 1)).toBe(raw);
  });
});

describe('traffic token checks', () => {
  const base: RoutableSandbox = {
    sandboxId: 's1', state: 'running', address: '10.0.0.2', envdAccessToken: 'envd-tok', trafficAccessToken: 'traffic-tok', maskRequestHost: undefined, httpsPorts: [], autoResume: true,
  };
  it('compares tokens exactly', () => {
    expect(tokensEqual('abc', 'abc')).toBe(true);
    expect(tokensEqual('abc', 'abd')).toBe(false);
    expect(tokensEqual('abc', 'abcd')).toBe(false);
  });
  it('requires the traffic token on non-envd ports of private sandboxes only', () => {
    expect(checkTrafficToken(base, 49983, {})).toBeUndefined();
    expect(checkTrafficToken(base, 8000, {})?.status).toBe(403);
    expect((checkTrafficToken(base, 8000, {})?.body as { message: string }).message).toContain('is missing');
    expect((checkTrafficToken(base, 8000, { 'e2b-traffic-access-token': 'x' })?.body as { message: string }).message).toContain('is invalid');
    expect(checkTrafficToken(base, 8000, { 'e2b-traffic-access-token': 'traffic-tok' })).toBeUndefined();
    expect(checkTrafficToken({ ...base, trafficAccessToken: null }, 8000, {})).toBeUndefined();
  });
  it('lets private sandboxes auto-resume only with the right credential for the port', () => {
    expect(mayAutoResume(base, 49983, { 'x-access-token': 'envd-tok' })).toBe(true);
    expect(mayAutoResume(base, 49983, { 'e2b-traffic-access-token': 'traffic-tok' })).toBe(false);
    expect(mayAutoResume(base, 8000, { 'e2b-traffic-access-token': 'traffic-tok' })).toBe(true);
    expect(mayAutoResume(base, 8000, {})).toBe(false);
    expect(mayAutoResume({ ...base, trafficAccessToken: null }, 8000, {})).toBe(true);
  });
});
