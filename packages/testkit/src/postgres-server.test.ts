import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './docker.ts';
import { startPostgres, type PostgresServer } from './postgres-server.ts';

const query = async (url: string, sql: string): Promise<string> => {
  const res = await run('psql', [url, '-qAt', '-v', 'ON_ERROR_STOP=1', '-c', sql], { timeoutMs: 30_000 });
  if (res.exitCode !== 0) throw new Error(res.stderr);
  return res.stdout.trim();
};
const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('startPostgres', () => {
  let server: PostgresServer | undefined;
  afterAll(() => server?.dispose());

  it('serves a database on loopback, makes more on request, and is gone after dispose', async () => {
    server = await startPostgres();
    expect(server.url).toMatch(/^postgres:\/\/tidepool@127\.0\.0\.1:\d+\/tidepool$/);
    expect(await query(server.url, 'SELECT current_database()')).toBe('tidepool');
    const other = await server.createDatabase('second_db');
    await query(other, 'CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (41)');
    expect(await query(other, 'SELECT x + 1 FROM t')).toBe('42');
    await expect(server.createDatabase('bad; DROP DATABASE tidepool')).rejects.toThrow(/must be \[a-z\]/);
    const { port } = server;
    await server.dispose();
    await server.dispose(); // twice is harmless
    expect(await accepts(port)).toBe(false);
  }, 120_000);
});
