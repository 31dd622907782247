import { randomUUID } from 'node:crypto';
import { initTRPC, TRPCError } from '@trpc/server';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { sql } from 'drizzle-orm';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { migrate } from '../src/postgres/migrate.js';
import { type FetchServer, serveFetch } from '../src/testing/serveFetch.js';
import {
  type IdempotencyRequestContext,
  idempotencyContext,
  idempotent,
} from '../src/trpc/index.js';
import { escapedErrors } from './fixtures/escapedErrors.js';
import { CREATE_ORDERS, createTestApp, type TestApp } from './fixtures/testApp.js';
import {
  connect,
  countOf,
  createScratchDatabase,
  rows,
  type ScratchDatabase,
  untilGateWaiter,
} from './harness.js';
import { mutate } from './httpClient.js';

/**
 * An advisory lock (one bigint: `classid` 0, `objid` this, `objsubid` 1 in `pg_locks`) the
 * test holds so that a statement of a request waits on it, and that statement's backend can
 * be killed at that point: the test trigger takes it before a completed record is inserted
 * (the upsert that stores a refusal), the Fetch handler below when asked to.
 */
const GATE = 727_271;

/**
 * Errors that reached the process's last-resort handlers: where a server with Node's
 * default handlers would have exited (postgres.js throws from a timer when it writes to a
 * connection whose socket has closed). vitest reports such an error only while its own
 * listener is the only one, and leaves it to these listeners otherwise: the tests assert
 * that they caught nothing.
 */
const { escaped, watch, unwatch } = escapedErrors();

describe('transaction mode on postgres-js when a backend dies under a request', () => {
  let scratch: ScratchDatabase;
  /** The test's own connection: it holds the gate, watches and kills backends, reads rows. */
  let observer: ReturnType<typeof connect>;

  beforeAll(async () => {
    watch();
    scratch = await createScratchDatabase();
    observer = connect(scratch.url, 1);
    await migrate(observer);
    await observer.execute(CREATE_ORDERS);
    await observer.execute(
      sql`create table fetch_orders (id serial primary key, tag text not null)`,
    );
    await observer.execute(sql`
      create function idem_test_gate() returns trigger language plpgsql as $$
      begin
        perform pg_advisory_xact_lock(${sql.raw(String(GATE))});
        return new;
      end $$`);
    await observer.execute(sql`
      create trigger idem_test_gate before insert on idem_keys
      for each row when (new.status = 'completed') execute function idem_test_gate()`);
  });

  afterAll(async () => {
    try {
      await observer?.$client.end({ timeout: 5 });
      await scratch?.drop();
      // Whatever a transaction left pending could still write once every test has ended.
      expect(escaped).toEqual([]);
    } finally {
      unwatch();
    }
  });

  afterEach(() => {
    escaped.length = 0;
  });

  /**
   * Holds the gate, starts `request`, waits until a backend of this database waits on the
   * gate, kills it, lets go of the gate and returns the request's answer.
   */
  async function killedAtTheGate<T>(request: () => Promise<T>): Promise<T> {
    await observer.execute(sql`select pg_advisory_lock(${GATE}::int8)`);
    try {
      const answer = request();
      // The kill must not wait for the answer; the answer is awaited below.
      answer.catch(() => undefined);
      const pid = await untilGateWaiter(
        observer,
        GATE,
        'a statement of the request to wait on the gate',
      );
      const [killed] = await rows<{ ok: boolean }>(
        observer,
        sql`select pg_terminate_backend(${pid}) as ok`,
      );
      expect(killed?.ok).toBe(true);
      return await answer;
    } finally {
      // The observer's own round trip: by its reply, a write the driver put off until the
      // next turn of the event loop has been attempted, so a crash is in `escaped`.
      await observer.execute(sql`select pg_advisory_unlock(${GATE}::int8)`);
    }
  }

  const recordOf = async (key: string) =>
    (
      await rows<{ status: string; kind: string | null }>(
        observer,
        sql`select status, outcome->>'kind' as kind from idem_keys where key = ${key}`,
      )
    )[0];
  const ordersOf = (table: 'orders' | 'fetch_orders', tag: string) =>
    countOf(
      observer,
      sql`select count(*)::int as n from ${sql.identifier(table)} where tag = ${tag}`,
    );

  // postgres.js 3.4.9 keeps the error the killed backend sent before it closed (57P01,
  // terminating connection due to administrator command) and hands it to the first statement
  // of the connection it reopens: a driver's fault, not idem's, met by the first request on
  // the pool after a kill, which fails before it runs anything. The tests below send that
  // request and check that it did nothing; the next request is the one that must work.

  describe('the tRPC middleware', () => {
    // One connection: the requests after the kill reopen the connection that died, they
    // cannot go round it to a spare one.
    let db: ReturnType<typeof connect>;
    let app: TestApp;
    let server: FetchServer;
    let gatedServer: FetchServer;
    /** Runs of `gatedOrder`, by tag. */
    const gatedRuns = new Map<string, number>();

    beforeAll(async () => {
      db = connect(scratch.url, 1);
      app = createTestApp(db);
      // One procedure of its own: it waits on the gate in a statement of its own and, when
      // that statement fails, throws a refusal the policy stores, with the failure as cause.
      const t = initTRPC.context<IdempotencyRequestContext>().create({ transformer: superjson });
      const gated = t.router({
        gatedOrder: t.procedure
          .use(idempotent({ mode: 'transaction', db, scope: () => 'user:ann' }))
          .input((value: unknown) => value as { tag: string; gated: boolean })
          .mutation(async ({ ctx, input }) => {
            const { tx } = ctx.idempotency;
            gatedRuns.set(input.tag, (gatedRuns.get(input.tag) ?? 0) + 1);
            await tx.execute(
              sql`insert into orders (principal, tag, sku) values ('ann', ${input.tag}, 'book')`,
            );
            try {
              if (input.gated) await tx.execute(sql`select pg_advisory_xact_lock(${GATE}::int8)`);
            } catch (error) {
              throw new TRPCError({ code: 'CONFLICT', message: 'no order', cause: error });
            }
            return { tag: input.tag };
          }),
      });
      server = await serveFetch((req) =>
        fetchRequestHandler({
          endpoint: '/trpc',
          req,
          router: app.router,
          createContext: app.createContext,
        }),
      );
      gatedServer = await serveFetch((req) =>
        fetchRequestHandler({
          endpoint: '/trpc',
          req,
          router: gated,
          createContext: idempotencyContext,
        }),
      );
    });

    afterAll(async () => {
      await server?.close();
      await gatedServer?.close();
      await db?.$client.end({ timeout: 5 });
    });

    it('killed while a refusal is stored: 500, nothing stored, the key free, the process and the pool alive', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const headers = { 'Idempotency-Key': key, 'x-user': 'alice' };
      const declined = { tag, sku: 'book', outcome: 'declined' as const };

      const failed = await killedAtTheGate(() => mutate(server.url, 'txOrder', declined, headers));
      expect(escaped).toEqual([]);
      expect(failed.status).toBe(500);
      expect(failed.error?.data.code).toBe('INTERNAL_SERVER_ERROR');
      expect(await recordOf(key)).toBeUndefined();
      expect(await ordersOf('orders', tag)).toBe(0);
      expect(app.executions.get(tag)).toBe(1);

      const metTheDriversError = await mutate(server.url, 'txOrder', declined, headers);
      expect(metTheDriversError.status).toBe(500);
      expect(app.executions.get(tag)).toBe(1);
      expect(await recordOf(key)).toBeUndefined();

      // The key is free: the retry runs the procedure again, and its refusal is stored.
      const retried = await mutate(server.url, 'txOrder', declined, headers);
      expect(retried.status).toBe(402);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(app.executions.get(tag)).toBe(2);
      expect(await recordOf(key)).toEqual({ status: 'completed', kind: 'error' });
      const replayed = await mutate(server.url, 'txOrder', declined, headers);
      expect(replayed.status).toBe(402);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(await ordersOf('orders', tag)).toBe(0);

      const otherTag = randomUUID();
      const next = await mutate(
        server.url,
        'txOrder',
        { tag: otherTag, sku: 'pen' },
        { 'Idempotency-Key': randomUUID(), 'x-user': 'alice' },
      );
      expect(next.status).toBe(200);
      expect(await ordersOf('orders', otherTag)).toBe(1);
      expect(escaped).toEqual([]);
    }, 120_000);

    it('killed under one of the procedure’s own statements, which then throws an error the policy stores: 500, nothing stored, the key free, the process and the pool alive', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const headers = { 'Idempotency-Key': key, 'x-user': 'ann' };

      const failed = await killedAtTheGate(() =>
        mutate(gatedServer.url, 'gatedOrder', { tag, gated: true }, headers),
      );
      expect(escaped).toEqual([]);
      expect(failed.status).toBe(500);
      expect(failed.error?.data.code).toBe('INTERNAL_SERVER_ERROR');
      expect(await recordOf(key)).toBeUndefined();
      expect(await ordersOf('orders', tag)).toBe(0);

      const metTheDriversError = await mutate(
        gatedServer.url,
        'gatedOrder',
        { tag, gated: false },
        headers,
      );
      expect(metTheDriversError.status).toBe(500);
      expect(gatedRuns.get(tag)).toBe(1);

      const retried = await mutate(gatedServer.url, 'gatedOrder', { tag, gated: false }, headers);
      expect(retried.status).toBe(200);
      expect(gatedRuns.get(tag)).toBe(2);
      expect(await recordOf(key)).toEqual({ status: 'completed', kind: 'success' });
      expect(await ordersOf('orders', tag)).toBe(1);
      expect(escaped).toEqual([]);
    }, 120_000);
  });

  describe('the Fetch handler', () => {
    // One connection, as above, and one pool per test: a connection the driver could no
    // longer use fails that test alone.
    let db: ReturnType<typeof connect>;
    const executions = new Map<string, number>();

    beforeEach(() => {
      db = connect(scratch.url, 1);
    });

    afterEach(async () => {
      await db.$client.end({ timeout: 5 });
    });

    /** What the handler does when one of its own statements fails. */
    type OnFailure = 'throw' | 'throw-402' | 'carry-on';

    interface Order {
      tag: string;
      /** Waits on the gate in one of its own statements, after writing its order. */
      gated?: boolean;
      /** Fails with a real SQLSTATE 08001 in a savepoint, on a live connection, as dblink would. */
      remoteDown?: boolean;
      /**
       * `throw`: throws the failure on (the policy releases it); `throw-402`: throws a 402
       * with the failure as its cause (the policy stores it); `carry-on`: answers as if
       * nothing had failed.
       */
      onFailure?: OnFailure;
      /** 200 instead of the stored refusal (422). */
      accept?: boolean;
    }

    /** Writes one order through `tx`, then refuses (422, a stored answer) unless told. */
    const handlerOn = () =>
      idempotentHandler(
        { mode: 'transaction', db, scope: () => 'user:ann' },
        async (request, { tx }) => {
          const order = (await request.json()) as Order;
          executions.set(order.tag, (executions.get(order.tag) ?? 0) + 1);
          await tx.execute(sql`insert into fetch_orders (tag) values (${order.tag})`);
          try {
            if (order.gated) await tx.execute(sql`select pg_advisory_xact_lock(${GATE}::int8)`);
            if (order.remoteDown) {
              await tx.transaction((savepoint) =>
                savepoint.execute(
                  sql`do $$ begin raise exception 'the remote server did not answer' using errcode = '08001'; end $$`,
                ),
              );
            }
          } catch (error) {
            if (order.onFailure === 'throw-402') {
              throw Object.assign(new Error('the order could not be placed'), {
                status: 402,
                cause: error,
              });
            }
            if (order.onFailure !== 'carry-on') throw error;
          }
          if (order.accept) return Response.json({ order: order.tag });
          return Response.json({ error: 'out of stock' }, { status: 422 });
        },
      );
    const post = (key: string, order: Order) =>
      new Request('http://shop.test/orders', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(order),
      });

    /** The request that meets the driver's stale error, then the retry that must run. */
    async function retryAfterTheKill(key: string, order: Order, ran: number) {
      const metTheDriversError = await handlerOn()(post(key, order));
      expect(metTheDriversError.status).toBe(500);
      expect(executions.get(order.tag)).toBe(ran);
      expect(await recordOf(key)).toBeUndefined();
      const retried = await handlerOn()(post(key, order));
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(executions.get(order.tag)).toBe(ran + 1);
      return retried;
    }

    /** A request on a fresh key that writes and commits. */
    async function nextRequestWorks() {
      const tag = randomUUID();
      const next = await handlerOn()(post(randomUUID(), { tag, accept: true }));
      expect(next.status).toBe(200);
      expect(await ordersOf('fetch_orders', tag)).toBe(1);
    }

    it('killed while a refusal is stored: a 500 problem, nothing stored, the key free, the process and the pool alive', async () => {
      const key = randomUUID();
      const tag = randomUUID();

      const failed = await killedAtTheGate(() => handlerOn()(post(key, { tag })));
      expect(escaped).toEqual([]);
      expect(failed.status).toBe(500);
      expect(failed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await recordOf(key)).toBeUndefined();
      expect(await ordersOf('fetch_orders', tag)).toBe(0);

      const retried = await retryAfterTheKill(key, { tag }, 1);
      expect(retried.status).toBe(422);
      expect(await recordOf(key)).toEqual({ status: 'completed', kind: 'success' });
      const replayed = await handlerOn()(post(key, { tag }));
      expect(replayed.status).toBe(422);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(await ordersOf('fetch_orders', tag)).toBe(0);

      await nextRequestWorks();
      expect(escaped).toEqual([]);
    }, 120_000);

    it.each([
      { onFailure: 'throw', accept: false, how: 'throws the failure on' },
      { onFailure: 'throw-402', accept: false, how: 'throws a 402 the policy stores' },
      { onFailure: 'carry-on', accept: false, how: 'refuses (422) as if nothing had failed' },
      { onFailure: 'carry-on', accept: true, how: 'succeeds as if nothing had failed' },
    ] as const)(
      'killed under one of the handler’s own statements, which then $how: a 500 problem, nothing stored, the key free, the process and the pool alive',
      async ({ onFailure, accept }) => {
        const key = randomUUID();
        const tag = randomUUID();

        const failed = await killedAtTheGate(() =>
          handlerOn()(post(key, { tag, gated: true, onFailure, accept })),
        );
        expect(escaped).toEqual([]);
        expect(failed.status).toBe(500);
        expect(failed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(await recordOf(key)).toBeUndefined();
        expect(await ordersOf('fetch_orders', tag)).toBe(0);

        const retried = await retryAfterTheKill(key, { tag, accept: true }, 1);
        expect(retried.status).toBe(200);
        expect(await recordOf(key)).toEqual({ status: 'completed', kind: 'success' });
        expect(await ordersOf('fetch_orders', tag)).toBe(1);

        await nextRequestWorks();
        expect(escaped).toEqual([]);
      },
      120_000,
    );

    it('an 08 error on a live connection is a failure like any other: released, or stored as the policy says', async () => {
      const released = { key: randomUUID(), tag: randomUUID() };
      await expect(
        handlerOn()(post(released.key, { tag: released.tag, remoteDown: true })),
      ).rejects.toMatchObject({
        cause: { code: '08001', message: 'the remote server did not answer' },
      });
      expect(await recordOf(released.key)).toBeUndefined();
      expect(await ordersOf('fetch_orders', released.tag)).toBe(0);
      const retried = await handlerOn()(post(released.key, { tag: released.tag, accept: true }));
      expect(retried.status).toBe(200);
      expect(executions.get(released.tag)).toBe(2);
      expect(await ordersOf('fetch_orders', released.tag)).toBe(1);

      const stored = { key: randomUUID(), tag: randomUUID() };
      const order: Order = { tag: stored.tag, remoteDown: true, onFailure: 'throw-402' };
      const refused = await handlerOn()(post(stored.key, order));
      expect(refused.status).toBe(402);
      expect(await recordOf(stored.key)).toEqual({ status: 'completed', kind: 'success' });
      const replayed = await handlerOn()(post(stored.key, order));
      expect(replayed.status).toBe(402);
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(executions.get(stored.tag)).toBe(1);
      expect(await ordersOf('fetch_orders', stored.tag)).toBe(0);
      expect(escaped).toEqual([]);
    });
  });
});
