import { randomUUID } from 'node:crypto';
import { memoryStore } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import type { PgDatabaseLike } from '../src/postgres/index.js';
import { rows, useDatabase } from './harness.js';

/**
 * `db` and `store` given as functions: an app builds its handlers when a module loads,
 * before its database is open. The function runs on the first request, once; one that
 * failed runs again on the next request instead of failing every request after it.
 */
const post = (key: string, body: unknown) =>
  new Request('http://shop.test/api/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });

describe('a db or store given as a function', () => {
  const database = useDatabase('PGlite');

  it('a store function runs on the first request, once, and a failure is tried again', async () => {
    let calls = 0;
    const store = memoryStore();
    const handler = idempotentHandler(
      {
        scope: () => 'user:ann',
        store: async () => {
          calls++;
          if (calls === 1) throw new Error('not open yet');
          return store;
        },
      },
      async () => Response.json({ order: randomUUID() }),
    );
    expect(calls).toBe(0);
    const key = randomUUID();
    const failed = await handler(post(key, { sku: 'tea' }));
    expect(failed.status).toBe(500);
    expect(await failed.text()).not.toContain('not open yet');
    const first = await handler(post(key, { sku: 'tea' }));
    const replay = await handler(post(key, { sku: 'tea' }));
    expect(first.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(await first.text());
    expect(calls).toBe(2);
  });

  it('a db function serves transaction mode: the handler writes through tx, once', async () => {
    const { db } = database();
    await db.execute(sql`create table if not exists lazy_orders (sku text not null)`);
    let calls = 0;
    const handler = idempotentHandler(
      {
        mode: 'transaction',
        scope: () => 'user:ann',
        db: async (): Promise<PgDatabaseLike> => {
          calls++;
          return db;
        },
      },
      async (request, { tx }) => {
        const { sku } = (await request.json()) as { sku: string };
        await tx.execute(sql`insert into lazy_orders (sku) values (${sku})`);
        return Response.json({ ordered: sku }, { status: 201 });
      },
    );
    const key = randomUUID();
    expect((await handler(post(key, { sku: 'mug' }))).status).toBe(201);
    const again = await handler(post(key, { sku: 'mug' }));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const written = await rows<{ n: number }>(
      db,
      sql`select count(*)::int as n from lazy_orders where sku = 'mug'`,
    );
    expect(written[0]?.n).toBe(1);
    expect(calls).toBe(1);
  });
});
