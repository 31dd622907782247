import { sql } from 'drizzle-orm';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { connect, countOf, createScratchDatabase, DATABASE_URL } from './harness.js';

async function databaseExists(name: string): Promise<boolean> {
  const db = connect(DATABASE_URL, 1);
  try {
    const n = await countOf(
      db,
      sql`select count(*)::int as n from pg_database where datname = ${name}`,
    );
    return n === 1;
  } finally {
    await db.$client.end({ timeout: 5 });
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
