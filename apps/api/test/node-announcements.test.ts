/**
 * `tidepool node` announcing itself through the cluster's database: the agent's heartbeat loop over
 * openNodeAnnouncements writes the node table of a real (throwaway) PostgreSQL, which an API's NodeStore on the
 * same database reads — registration, fresh heartbeats, loss when they stop, re-registration when its row goes.
 * Nothing else can announce a node: there is no heartbeat endpoint; the database is the only way in.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '@tidepool/testkit';
import { openNodeAnnouncements } from '../src/node-agent/database-heartbeats.ts';
import { startHeartbeats } from '../src/node-agent/heartbeat-loop.ts';
import { NodeStore } from '../src/nodes/node-store.ts';
import { PostgresDatabase } from '../src/store/postgres-database.ts';

const logger = pino({ level: 'silent' });
let server: PostgresServer;
let apiDb: PostgresDatabase;
let nodes: NodeStore;

const until = async (check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
};

beforeAll(async () => {
  server = await startPostgres();
  apiDb = await PostgresDatabase.open({ url: server.url, logger });
  nodes = new NodeStore(apiDb);
}, 120_000);

afterAll(async () => {
  await apiDb?.close();
  await server?.dispose();
});

describe('node announcements through the cluster database', () => {
  it('registers the node in the table the API reads and keeps its heartbeat fresh; stopped, it is marked lost', async () => {
    const announcements = await openNodeAnnouncements({ databaseUrl: server.url }, logger);
    expect(announcements.destination).toContain('127.0.0.1');
    let available = 3000;
    const loop = startHeartbeats({
      heartbeats: announcements.heartbeats,
      registration: { nodeId: 'node-a', url: 'https://198.19.0.11:7443', version: 'test' },
      capacity: async () => ({ cpuCount: 4, memoryMB: 4096, memoryAvailableMB: available-- }),
      intervalMs: 50,
      logger,
    });
    try {
      await until(async () => (await nodes.get('node-a')) !== undefined);
      const first = (await nodes.get('node-a'))!;
      expect(first).toMatchObject({ nodeId: 'node-a', url: 'https://198.19.0.11:7443', version: 'test', status: 'ready', capacity: { cpuCount: 4, memoryMB: 4096 } });
      await until(async () => (await nodes.get('node-a'))!.lastHeartbeat > first.lastHeartbeat);
      expect((await nodes.get('node-a'))!.capacity.memoryAvailableMB).toBeLessThan(first.capacity.memoryAvailableMB);
      // The row is removed behind the agent's back (a reset table): its next heartbeat is refused and it registers again.
      await apiDb.run('DELETE FROM nodes WHERE node_id = ?', ['node-a']);
      await until(async () => (await nodes.get('node-a')) !== undefined);
    } finally {
      await loop.stop();
      await announcements.close();
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(await nodes.markLost(200)).toContain('node-a');
    expect((await nodes.get('node-a'))!.status).toBe('lost');
  });

  it('refuses to start against a database it cannot use, with the setting named and no password echoed', async () => {
    const wrong = server.url.replace(/\/[^/]+$/, '/no_such_database').replace('postgres://', 'postgres://tidepool:s3cret-pw@');
    const error = await openNodeAnnouncements({ databaseUrl: wrong }, logger).then(() => undefined, (e: unknown) => e as Error);
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(/TIDEPOOL_DATABASE_URL/);
    expect(error!.message).not.toContain('s3cret-pw');
  });

  it('without a database, only logs (and says so)', async () => {
    const lines: string[] = [];
    const capture = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const announcements = await openNodeAnnouncements({ databaseUrl: '' }, capture);
    expect(announcements.destination).toBe('log');
    await announcements.heartbeats.register({ nodeId: 'node-b', url: 'https://198.19.0.12:7443', version: 'test', capacity: { cpuCount: 1, memoryMB: 1, memoryAvailableMB: 1 } });
    expect(lines.join('')).toMatch(/registers nowhere/);
    expect(await nodes.get('node-b')).toBeUndefined();
  });
});
