import pg from 'pg';

/** Runs one statement on its own connection to `url` and returns its rows (what a test checks in PostgreSQL). */
export async function pgRows(url: string, sql: string, params: unknown[] = []): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}
