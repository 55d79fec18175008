import { describe, expect, it } from 'vitest';
import { ConnectionLimiter } from './connection-limits.ts';

describe('ConnectionLimiter', () => {
  it('caps per sandbox and per client address, and frees on release', () => {
    const limiter = new ConnectionLimiter({ maxConnectionsPerSandbox: 2, maxConnectionsPerClient: 3 });
    const a = limiter.acquire('sbx1', '10.0.0.1', 'app');
    const b = limiter.acquire('sbx1', '10.0.0.2', 'app');
    const refused = limiter.acquire('sbx1', '10.0.0.3', 'app');
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
    expect(typeof limiter.acquire('sbx2', '10.0.0.9', 'app')).toBe('function');
    expect(typeof limiter.acquire('sbx3', '10.0.0.9', 'app')).toBe('function');
    expect(typeof limiter.acquire('sbx4', '10.0.0.9', 'app')).toBe('function');
    expect(limiter.acquire('sbx5', '10.0.0.9', 'app')).toMatchObject({ status: 429, body: { connectionLimit: 3, code: 429 } });
  });

  it('keeps envd and app-port exchanges under separate caps: a flood on a public port never blocks envd', () => {
    const limiter = new ConnectionLimiter({ maxConnectionsPerSandbox: 2, maxConnectionsPerClient: 100 });
    // An anonymous client fills the app-port cap of sbx1 (public port traffic).
    expect(typeof limiter.acquire('sbx1', '203.0.113.7', 'app')).toBe('function');
    expect(typeof limiter.acquire('sbx1', '203.0.113.8', 'app')).toBe('function');
    expect(limiter.acquire('sbx1', '203.0.113.9', 'app')).toMatchObject({ status: 429, reason: 'sandbox_connection_limit' });
    // The owner's envd calls still get through, up to their own cap.
    const envd = limiter.acquire('sbx1', '127.0.0.1', 'envd');
    expect(typeof envd).toBe('function');
    expect(typeof limiter.acquire('sbx1', '127.0.0.1', 'envd')).toBe('function');
    expect(limiter.acquire('sbx1', '127.0.0.1', 'envd')).toMatchObject({ status: 429, body: { connectionLimit: 2 } });
    // Envd traffic at its cap does not take app-port slots either.
    (envd as () => void)();
    expect(typeof limiter.acquire('sbx1', '127.0.0.1', 'envd')).toBe('function');
    expect(limiter.activeFor('sbx1')).toBe(4);
  });
});
