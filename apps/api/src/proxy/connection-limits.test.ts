import { describe, expect, it } from 'vitest';
import { ConnectionLimiter } from './connection-limits.ts';

describe('ConnectionLimiter', () => {
  it('caps per sandbox and per client address, and frees on release', () => {
    const limiter = new ConnectionLimiter({ maxConnectionsPerSandbox: 2, maxConnectionsPerClient: 3 });
    const a = limiter.acquire('sbx1', '10.0.0.1');
    const b = limiter.acquire('sbx1', '10.0.0.2');
    const refused = limiter.acquire('sbx1', '10.0.0.3');
    expect(typeof a).toBe('function');
    expect(typeof b).toBe('function');
    expect(refused).toEqual({
      reason: 'sandbox_connection_limit',
      status: 429,
      body: { sandboxId: 'sbx1', message: 'The sandbox has too many concurrent incoming connections (limit: 2)', connectionLimit: 2, code: 429 },
    });
    (a as () => void)();
    (a as () => void)();
    expect(limiter.activeFor('sbx1')).toBe(1);
    expect(typeof limiter.acquire('sbx2', '10.0.0.9')).toBe('function');
    expect(typeof limiter.acquire('sbx3', '10.0.0.9')).toBe('function');
    expect(typeof limiter.acquire('sbx4', '10.0.0.9')).toBe('function');
    expect(limiter.acquire('sbx5', '10.0.0.9')).toMatchObject({ status: 429, body: { connectionLimit: 3, code: 429 } });
  });
});
