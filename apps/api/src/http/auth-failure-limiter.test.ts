import { describe, expect, it } from 'vitest';
import { AuthFailureLimiter } from './auth-failure-limiter.ts';
import { clientAddress } from './client-address.ts';

function limiterAt(limit = 3, windowMs = 60_000, maxTracked = 100) {
  const clock = { now: 1_000_000 };
  return { clock, limiter: new AuthFailureLimiter({ limit, windowMs, maxTracked }, () => clock.now) };
}

describe('AuthFailureLimiter', () => {
  it('lets an address fail `limit` times, then refuses it until its window ends', () => {
    const { clock, limiter } = limiterAt(3, 60_000);
    const reached: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
      reached.push(limiter.recordFailure('10.0.0.1'));
    }
    expect(reached).toEqual([false, false, true]);
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(60);
    clock.now += 59_001;
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(1);
    clock.now += 999;
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
    // A new window: the count starts again.
    limiter.recordFailure('10.0.0.1');
    expect(limiter.retryAfterSeconds('10.0.0.1')).toBe(0);
  });

  it('keeps addresses apart', () => {
    const { limiter } = limiterAt(2);
    limiter.recordFailure('a');
    limiter.recordFailure('a');
    expect(limiter.retryAfterSeconds('a')).toBeGreaterThan(0);
    expect(limiter.retryAfterSeconds('b')).toBe(0);
  });

  it('counts failures spread over the window from the first one (no sliding reset)', () => {
    const { clock, limiter } = limiterAt(3, 10_000);
    limiter.recordFailure('a');
    clock.now += 4_000;
    limiter.recordFailure('a');
    clock.now += 4_000;
    limiter.recordFailure('a');
    expect(limiter.retryAfterSeconds('a')).toBe(2);
  });

  it('tracks at most maxTracked addresses, forgetting the least recently failing', () => {
    const { limiter } = limiterAt(1, 60_000, 3);
    for (const address of ['a', 'b', 'c']) limiter.recordFailure(address);
    limiter.recordFailure('a'); // a is now the most recent
    limiter.recordFailure('d'); // evicts b
    expect(limiter.trackedCount).toBe(3);
    expect(limiter.retryAfterSeconds('b')).toBe(0);
    expect(limiter.retryAfterSeconds('a')).toBeGreaterThan(0);
    for (let i = 0; i < 10_000; i++) limiter.recordFailure(`x${i}`);
    expect(limiter.trackedCount).toBe(3);
  });

  it('drops ended windows when asked about them', () => {
    const { clock, limiter } = limiterAt(1, 1_000);
    limiter.recordFailure('a');
    clock.now += 1_000;
    expect(limiter.retryAfterSeconds('a')).toBe(0);
    expect(limiter.trackedCount).toBe(0);
  });

  it('limit 0 never refuses and tracks nothing', () => {
    const { limiter } = limiterAt(0);
    for (let i = 0; i < 100; i++) limiter.recordFailure('a');
    expect(limiter.retryAfterSeconds('a')).toBe(0);
    expect(limiter.trackedCount).toBe(0);
  });
});

describe('clientAddress', () => {
  it('is the socket peer unless X-Forwarded-For is trusted', () => {
    expect(clientAddress('::ffff:127.0.0.1', '203.0.113.9', false)).toBe('127.0.0.1');
    expect(clientAddress('::1', undefined, true)).toBe('::1');
  });

  it('takes the last forwarded entry (the trusted proxy appended it), not what the client wrote before it', () => {
    expect(clientAddress('10.0.0.2', '1.2.3.4, 198.51.100.7', true)).toBe('198.51.100.7');
    expect(clientAddress('10.0.0.2', ['1.2.3.4', '198.51.100.8'], true)).toBe('198.51.100.8');
  });

  it('ignores a forwarded entry that is not an address', () => {
    expect(clientAddress('10.0.0.2', '198.51.100.7, not-an-ip', true)).toBe('10.0.0.2');
    expect(clientAddress('10.0.0.2', '', true)).toBe('10.0.0.2');
  });
});
