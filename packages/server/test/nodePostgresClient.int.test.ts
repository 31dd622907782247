import { randomUUID } from 'node:crypto';
import { isConfigurationError } from '@idem/core';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { countKeys, postgresUrl, useDatabase } from './harness.js';

const post = (key: string, body: unknown) =>
  new Request('http://shop.test/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });

/**
 * A database on one node-postgres `Client` (`drizzle(client)`) instead of a `Pool`: fine for
 * single statements, refused wherever idem runs each call in a transaction of its own, as
 * concurrent transactions would share the one connection.
 */
describe('idem on one node-postgres Client', () => {
  const database = useDatabase('node-postgres');
  let client: pg.Client | undefined;
  let db: NodePgDatabase & { $client: pg.Client };

  beforeAll(async () => {
    client = new pg.Client({ connectionString: postgresUrl(database().url) });
    await client.connect();
    db = drizzle(client);
  });
  afterAll(async () => {
    await client?.end();
  });

  it('runs lease mode: the first call runs, the same key replays', async () => {
    let runs = 0;
    const handle = idempotentHandler({ db, scope: () => 'user:ann' }, () => {
      runs++;
      return Response.json({ runs });
    });
    const key = randomUUID();
    const first = await handle(post(key, { sku: 'book' }));
    const again = await handle(post(key, { sku: 'book' }));
    expect(first.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(JSON.stringify({ runs: 1 }));
    expect(runs).toBe(1);
  });

  it('refuses transaction mode with a ConfigurationError naming the Pool; nothing runs or is stored', async () => {
    let runs = 0;
    const handle = idempotentHandler({ mode: 'transaction', db, scope: () => 'user:ann' }, () => {
      runs++;
      return Response.json({ runs });
    });
    const key = randomUUID();
    const answer = await handle(post(key, { sku: 'book' }));
    expect(answer.status).toBe(500);
    expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await answer.json()) as { code: string; detail: string };
    expect(problem.code).toBe('INVALID_CONFIGURATION');
    expect(problem.detail).toMatch(/^Transaction mode .* one node-postgres Client.*pg Pool/);
    expect(runs).toBe(0);
    expect(await countKeys(database().db, key)).toBe(0);
  });

  it('refuses an idempotentConsumer at start-up with a ConfigurationError naming the Pool', () => {
    let caught: unknown;
    try {
      idempotentConsumer({ db, name: 'billing' });
    } catch (error) {
      caught = error;
    }
    expect(isConfigurationError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(
      /idempotentConsumer "billing" runs each call in a transaction .* drizzle\(new Pool/,
    );
  });
});
