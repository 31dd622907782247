import pg from 'pg';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createScratchDatabase } from '../src/testing/createScratchDatabase.js';

const serverUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function databaseExists(name: string): Promise<boolean> {
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_database where datname = ${name}`;
    return row?.n === 1;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** A node-postgres client on `url` that records the errors it is sent. */
async function watchedClient(url: string) {
  const client = new pg.Client({ connectionString: url });
  const errors: Error[] = [];
  client.on('error', (error) => errors.push(error));
  await client.connect();
  return { client, errors };
}

describe('createScratchDatabase().drop()', () => {
  it('lets a connection that is closing leave by itself: its client is sent no error', async () => {
    const scratch = await createScratchDatabase({ prefix: 'idem_scratch' });
    const { client, errors } = await watchedClient(scratch.url);
    // The client closes while the drop is already under way, as a pool whose end()
    // resolved before its last backend had gone.
    const closed = new Promise<void>((resolve, reject) => {
      setTimeout(() => client.end().then(resolve, reject), 50);
    });
    await scratch.drop();
    await closed;
    expect(errors).toEqual([]);
    expect(await databaseExists(scratch.name)).toBe(false);
  });

  it('ends a connection that stays open, then drops the database', async () => {
    const scratch = await createScratchDatabase({ prefix: 'idem_scratch' });
    const { client, errors } = await watchedClient(scratch.url);
    await scratch.drop();
    expect(await databaseExists(scratch.name)).toBe(false);
    await expect(client.query('select 1')).rejects.toThrow();
    expect(errors.map((error) => (error as Error & { code?: string }).code)).toContain('57P01');
    await client.end().catch(() => {});
  });
});
