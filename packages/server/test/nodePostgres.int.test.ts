import { randomUUID } from 'node:crypto';
import { isConfigurationError } from '@idem/core';
import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { isConnectionError } from '../src/postgres/connectionError.js';
import { deferred, until } from './fixtures/deferred.js';
import { tcpServer } from './fixtures/tcpServer.js';
import { countKeys, countOf, oneRow, postgresUrl, rows, useDatabase } from './harness.js';

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

  it('refuses transaction mode at start-up with a ConfigurationError naming the Pool', () => {
    let caught: unknown;
    try {
      idempotentHandler({ mode: 'transaction', db, scope: () => 'user:ann' }, () =>
        Response.json({}),
      );
    } catch (error) {
      caught = error;
    }
    expect(isConfigurationError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(
      /^idempotentHandler.* in transaction mode runs each call in a transaction .* one node-postgres Client.*pg Pool/,
    );
  });

  it('refuses transaction mode on a database given as a function at its first call; nothing runs or is stored', async () => {
    let runs = 0;
    const handle = idempotentHandler(
      { mode: 'transaction', db: () => db, scope: () => 'user:ann' },
      () => {
        runs++;
        return Response.json({ runs });
      },
    );
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

/**
 * A pooled connection lost while a transaction-mode handler awaits something else: node-postgres
 * emits it as the checked-out client's `error` event, which must not become an uncaught
 * exception (vitest fails the run on one). The request fails, nothing is stored, and a retry
 * runs on another connection.
 */
describe('transaction mode on a node-postgres Pool whose connection is lost', () => {
  const database = useDatabase('node-postgres');

  beforeAll(async () => {
    await database().db.execute(
      sql`create table if not exists pool_orders (id serial primary key, tag text not null)`,
    );
  });

  it('answers the request as failed, stores nothing, and a retry runs once', async () => {
    const { db } = database();
    const backend = deferred<number>();
    const resume = deferred();
    let runs = 0;
    const handle = idempotentHandler(
      { mode: 'transaction', db, scope: () => 'user:ann' },
      async (request, { tx }) => {
        runs++;
        const { tag } = (await request.json()) as { tag: string };
        if (runs === 1) {
          const [row] = await rows<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`);
          backend.resolve(row?.pid ?? 0);
          await resume.promise; // not a statement: the connection dies between two
        }
        await tx.execute(sql`insert into pool_orders (tag) values (${tag})`);
        return Response.json({ tag, runs }, { status: 201 });
      },
    );
    const key = randomUUID();
    const tag = randomUUID();
    const first = handle(post(key, { tag })).then(
      (response) => response.status,
      () => 'threw',
    );
    const pid = await backend.promise;
    await db.execute(sql`select pg_terminate_backend(${pid}::int)`);
    await until(
      async () =>
        (await countOf(
          db,
          sql`select count(*)::int as n from pg_stat_activity where pid = ${pid}::int`,
        )) === 0,
      { what: 'the handler’s backend to end', timeoutMs: 60_000 },
    );
    resume.resolve();
    expect(await first).not.toBe(201);
    expect(await countKeys(db, key)).toBe(0);
    const ordersOf = () =>
      countOf(db, sql`select count(*)::int as n from pool_orders where tag = ${tag}`);
    expect(await ordersOf()).toBe(0);

    const retried = await handle(post(key, { tag }));
    expect(retried.status).toBe(201);
    expect(await retried.json()).toEqual({ tag, runs: 2 });
    expect(await ordersOf()).toBe(1);
    expect(await countKeys(db, key)).toBe(1);
  });
});

/** What `promise` rejected with; fails the test if it resolved. */
async function rejectionOf(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the statement to fail');
}

/** What the first statement through a one-connection pool on `url` fails with. */
async function firstStatementFailure(url: string, connectionTimeoutMillis = 0): Promise<unknown> {
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis });
  pool.on('error', () => undefined);
  try {
    return await rejectionOf(drizzle(pool).execute(sql`select 1`));
  } finally {
    await pool.end();
  }
}

/**
 * node-postgres names most lost connections by message alone (no code): each is a
 * connection error, after which idem sends nothing more on that connection.
 */
describe("isConnectionError on node-postgres's errors", () => {
  const database = useDatabase('node-postgres');

  it('a connection the server closes at connect, and a connect that times out', async () => {
    const closing = await tcpServer((socket) => socket.destroy());
    const silent = await tcpServer(() => undefined);
    try {
      const closed = await firstStatementFailure(closing.url);
      expect((closed as Error).cause).toMatchObject({
        message: 'Connection terminated unexpectedly',
      });
      expect(isConnectionError(closed)).toBe(true);
      const timedOut = await firstStatementFailure(silent.url, 300);
      expect((timedOut as Error).cause).toMatchObject({
        message: 'Connection terminated due to connection timeout',
      });
      expect(isConnectionError(timedOut)).toBe(true);
    } finally {
      await Promise.all([closing.close(), silent.close()]);
    }
  });

  it("a backend killed under a statement (57P01), then the broken client's next statement, and an ended client's", async () => {
    const { db, url } = database();
    const client = new pg.Client({ connectionString: postgresUrl(url) });
    client.on('error', () => undefined);
    await client.connect();
    const own = drizzle(client);
    const { pid } = await oneRow<{ pid: number }>(own, sql`select pg_backend_pid() as pid`);
    const running = rejectionOf(own.execute(sql`select pg_sleep(60)`));
    await until(
      async () =>
        (await countOf(
          db,
          sql`select count(*)::int as n from pg_stat_activity
              where pid = ${pid}::int and state = 'active'`,
        )) === 1,
      { what: 'the statement to run', timeoutMs: 60_000 },
    );
    await db.execute(sql`select pg_terminate_backend(${pid}::int)`);
    const killed = await running;
    expect((killed as Error).cause).toMatchObject({ code: '57P01' });
    expect(isConnectionError(killed)).toBe(true);
    // The broken client's next statement: no code, a message (which one depends on how far
    // the client got in noticing its socket's end).
    const next = await rejectionOf(own.execute(sql`select 1`));
    expect((next as Error & { cause: { code?: unknown } }).cause.code).toBeUndefined();
    expect(isConnectionError(next)).toBe(true);

    const ended = new pg.Client({ connectionString: postgresUrl(url) });
    await ended.connect();
    await ended.end();
    const afterEnd = await rejectionOf(drizzle(ended).execute(sql`select 1`));
    expect((afterEnd as Error).cause).toMatchObject({
      message: 'Client was closed and is not queryable',
    });
    expect(isConnectionError(afterEnd)).toBe(true);
  });

  it('errors that leave the connection open, and a pool with no free client, do not count', async () => {
    const { url } = database();
    // The pool's one client connects without a bound (a loaded machine may take longer than
    // the short wait below to open it); only the wait for a free client is then bounded.
    const pool = new pg.Pool({ connectionString: postgresUrl(url), max: 1 });
    const pooled = drizzle(pool);
    const held = await pool.connect();
    pool.options.connectionTimeoutMillis = 100;
    try {
      const exhausted = await rejectionOf(pooled.execute(sql`select 1`));
      expect((exhausted as Error).cause).toMatchObject({
        message: 'timeout exceeded when trying to connect',
      });
      expect(isConnectionError(exhausted)).toBe(false);
      held.release();
      const syntax = await rejectionOf(pooled.execute(sql`select from from`));
      expect((syntax as Error).cause).toMatchObject({ code: '42601' });
      expect(isConnectionError(syntax)).toBe(false);
    } finally {
      await pool.end();
    }
  });
});
