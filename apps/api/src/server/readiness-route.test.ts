import { describe, expect, it } from 'vitest';
import { checkReadiness } from './readiness-route.ts';

const database = (answer: () => Promise<unknown>) => ({ get: answer as never });

describe('checkReadiness', () => {
  it('is ready when the database answers and a node is ready', async () => {
    expect(await checkReadiness({ database: database(async () => ({ one: 1 })), nodeStatuses: () => ['draining', 'ready', 'lost'] })).toEqual({ ready: true, database: 'ok', nodes: { ready: 1, total: 3 } });
  });

  it('is not ready without a ready node, or when the database fails or hangs past its deadline', async () => {
    expect(await checkReadiness({ database: database(async () => ({ one: 1 })), nodeStatuses: () => ['draining', undefined] })).toMatchObject({ ready: false, nodes: { ready: 0, total: 2 } });
    expect(await checkReadiness({ database: database(() => Promise.reject(new Error('gone'))), nodeStatuses: () => ['ready'] })).toMatchObject({ ready: false, database: 'unreachable' });
    const started = Date.now();
    expect(await checkReadiness({ database: database(() => new Promise(() => undefined)), nodeStatuses: () => ['ready'] })).toMatchObject({ ready: false, database: 'unreachable' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
