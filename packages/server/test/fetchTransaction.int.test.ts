import { randomUUID } from 'node:crypto';
import { Socket } from 'node:net';
import { type IdempotencyEvent, isConfigurationError, type Serializer } from '@idem/core';
import { memoryStore } from '@idem/core/testing';
import { type Logger, sql, TransactionRollbackError } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { idempotentHandler } from '../src/fetch/index.js';
import { causeChain } from '../src/postgres/connectionError.js';
import { TransactionAbortedError } from '../src/postgres/index.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { Gates } from './fixtures/testApp.js';
import {
  connect,
  countOf,
  driverBackends,
  loggedDatabase,
  loggedTransaction,
  postgresUrl,
  rows,
  statementText,
  untilLockWaiters,
  useDatabase,
} from './harness.js';

const CONCURRENCY = 50;

/** How many writes this process makes to its sockets while `run` runs. */
async function socketWritesDuring(run: () => Promise<void>): Promise<number> {
  const write = Socket.prototype.write;
  let writes = 0;
  Socket.prototype.write = function counted(this: Socket, ...args: unknown[]) {
    writes++;
    return (write as (...written: unknown[]) => boolean).apply(this, args);
  } as typeof write;
  try {
    await run();
  } finally {
    Socket.prototype.write = write;
  }
  return writes;
}

const post = (key: string, body: unknown) =>
  new Request('http://shop.test/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });

interface Order {
  tag: string;
  /** What the handler answers after writing its order. */
  answer?: 'created' | 'refused' | 'unavailable' | 'throws-stored' | 'throws-transient';
  /** Wait at the tag's gate after writing the order, until the test opens it. */
  gate?: boolean;
}

for (const backend of driverBackends) {
  describe(`idempotentHandler in transaction mode on ${backend}`, () => {
    const database = useDatabase(backend);
    const executions = new Map<string, number>();
    const gates = new Gates();

    beforeAll(async () => {
      await database().db.execute(
        sql`create table if not exists fetch_orders (id serial primary key, tag text not null)`,
      );
    });

    /** A handler that writes one order through `tx`, then answers as the body asks. */
    const handlerOn = (
      db: PgDatabaseLike,
      extra: { inProgress?: { waitMs: number }; serializer?: Serializer } = {},
    ) =>
      idempotentHandler(
        { mode: 'transaction', db, scope: () => 'user:ann', ...extra },
        async (request, { tx }) => {
          const order = (await request.json()) as Order;
          executions.set(order.tag, (executions.get(order.tag) ?? 0) + 1);
          await tx.execute(sql`insert into fetch_orders (tag) values (${order.tag})`);
          if (order.gate) await gates.wait(order.tag);
          switch (order.answer) {
            case 'refused':
              return Response.json({ error: 'out of stock' }, { status: 409 });
            case 'unavailable':
              return Response.json({ error: 'try later' }, { status: 503 });
            case 'throws-stored':
              throw Object.assign(new Error('The card was declined'), { status: 402 });
            case 'throws-transient':
              throw new Error('the warehouse did not answer');
            default:
              return Response.json({ order: order.tag, execution: executions.get(order.tag) });
          }
        },
      );
    const ordersOf = (tag: string) =>
      countOf(database().db, sql`select count(*)::int as n from fetch_orders where tag = ${tag}`);
    const recordOf = async (key: string) =>
      (
        await rows<{ status: string }>(
          database().db,
          sql`select status from idem_keys where key = ${key}`,
        )
      )[0]?.status;
    /**
     * Sends `order` again under `key`: the first answer again, marked replayed, without
     * running the handler again; `orders` orders of its tag stay written.
     */
    const expectReplay = async (
      handle: ReturnType<typeof handlerOn>,
      key: string,
      order: Order,
      first: { status: number; body: string },
      orders: number,
    ) => {
      const replay = await handle(post(key, order));
      expect(replay.status).toBe(first.status);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.text()).toBe(first.body);
      expect(executions.get(order.tag)).toBe(1);
      expect(await ordersOf(order.tag)).toBe(orders);
    };

    it('commits the handler’s writes with the stored response; a replay writes nothing', async () => {
      const handle = handlerOn(database().db);
      const key = randomUUID();
      const tag = randomUUID();
      const first = await handle(post(key, { tag }));
      expect(first.status).toBe(200);
      const body = await first.text();
      expect(JSON.parse(body)).toEqual({ order: tag, execution: 1 });
      expect(await recordOf(key)).toBe('completed');
      expect(await ordersOf(tag)).toBe(1);

      await expectReplay(handle, key, { tag }, { status: first.status, body }, 1);
    });

    it('a stored 4xx response, or a thrown error the policy stores, rolls the writes back and replays', async () => {
      const handle = handlerOn(database().db);
      for (const answer of ['refused', 'throws-stored'] as const) {
        const key = randomUUID();
        const tag = randomUUID();
        const first = await handle(post(key, { tag, answer }));
        expect(first.status).toBe(answer === 'refused' ? 409 : 402);
        const body = await first.text();
        expect(await ordersOf(tag)).toBe(0);
        expect(await recordOf(key)).toBe('completed');

        await expectReplay(handle, key, { tag, answer }, { status: first.status, body }, 0);
      }
    });

    it("a refused COMMIT of a 4xx stored after the rollback is the store's failure: 500 STORE_FAILED, nothing stored, the retry runs", async () => {
      // A check at COMMIT on idem's own row (a trigger deferred to the end of the
      // transaction), for these keys only: the COMMIT then holds idem's write alone.
      const { db } = database();
      await db.execute(sql`create or replace function fetch_refuse_commit() returns trigger
        language plpgsql as $$ begin raise exception 'refused at commit'; end $$`);
      await db.execute(sql`create constraint trigger fetch_refuse_commit after insert or update
        on idem_keys deferrable initially deferred for each row
        when (new.key like 'refuse-commit-%' and new.status = 'completed')
        execute function fetch_refuse_commit()`);
      const handle = handlerOn(db);
      const key = `refuse-commit-${randomUUID()}`;
      const tag = randomUUID();
      try {
        const first = await handle(post(key, { tag, answer: 'refused' }));
        expect(first.status).toBe(500);
        expect(await first.json()).toMatchObject({ code: 'STORE_FAILED' });
        expect(await ordersOf(tag)).toBe(0);
        expect(await recordOf(key)).toBeUndefined();
      } finally {
        await db.execute(sql`drop trigger fetch_refuse_commit on idem_keys`);
      }
      const retried = await handle(post(key, { tag, answer: 'refused' }));
      expect(retried.status).toBe(409);
      expect(await recordOf(key)).toBe('completed');
    });

    it('a released answer (a 5xx, a transient throw) leaves nothing: no writes, no key; the retry runs', async () => {
      const handle = handlerOn(database().db);
      const key = randomUUID();
      const tag = randomUUID();
      const released = await handle(post(key, { tag, answer: 'unavailable' }));
      expect(released.status).toBe(503);
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();

      const thrownKey = randomUUID();
      await expect(handle(post(thrownKey, { tag, answer: 'throws-transient' }))).rejects.toThrow(
        'the warehouse did not answer',
      );
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(thrownKey)).toBeUndefined();

      const retried = await handle(post(key, { tag }));
      expect(retried.status).toBe(200);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(executions.get(tag)).toBe(3);
      expect(await ordersOf(tag)).toBe(1);
    });

    it('a completion that fails before it is sent (an answer the store cannot encode) commits nothing', async () => {
      // The completion goes out ahead of the COMMIT without waiting for its answer where it
      // can (postgres-js); one that never went out must not let that COMMIT through.
      const bigIntSerializer: Serializer = {
        serialize: (value) => ({ value, sentAt: 1n }) as never,
        deserialize: (json) => json,
      };
      const handle = handlerOn(database().db, { serializer: bigIntSerializer });
      const key = randomUUID();
      const tag = randomUUID();
      const failed = await handle(post(key, { tag })).then(
        (response) => response.status,
        (error: unknown) => error,
      );
      expect(failed).toBe(500);
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
    });

    it("a COMMIT the server refuses (a deferred constraint) fails the call with the server's error, not the store's: no completed, nothing stored, the retry runs", async () => {
      // A check Postgres makes only at COMMIT: a unique constraint deferred to the end of the
      // transaction, which a handler that writes its tag twice breaks.
      await database().db.execute(
        sql`create table if not exists fetch_deferred (tag text, constraint fetch_deferred_once unique (tag) deferrable initially deferred)`,
      );
      const events: IdempotencyEvent[] = [];
      const handle = idempotentHandler(
        {
          mode: 'transaction',
          db: database().db,
          scope: () => 'user:ann',
          onEvent: (event) => {
            events.push(event);
          },
        },
        async (request, { tx }) => {
          const { tag, twice } = (await request.json()) as { tag: string; twice: boolean };
          await tx.execute(sql`insert into fetch_deferred (tag) values (${tag})`);
          if (twice) await tx.execute(sql`insert into fetch_deferred (tag) values (${tag})`);
          return Response.json({ tag }, { status: 201 });
        },
      );
      const key = randomUUID();
      const typesOf = () => events.filter((event) => event.key === key).map(({ type }) => type);
      // The handler's writes failed at COMMIT as a failed statement of its own would: its
      // error goes on to the framework (a 500), as it would without idem, and the key is free.
      const failed: unknown = await handle(post(key, { tag: key, twice: true })).catch(
        (error: unknown) => error,
      );
      expect([...causeChain(failed)].map(({ code }) => code)).toContain('23505');
      expect(typesOf()).toEqual(['claimed', 'released']);
      expect(events.find(({ type }) => type === 'released')?.error).toBe(failed);
      expect(await recordOf(key)).toBeUndefined();
      // Nothing committed, so the retry runs again; its COMMIT goes through and is told.
      const retried = await handle(post(key, { tag: key, twice: false }));
      expect(retried.status).toBe(201);
      expect(typesOf()).toEqual(['claimed', 'released', 'claimed', 'completed']);
      expect(await recordOf(key)).toBe('completed');
    });

    it('hands over tx as db.transaction does: a nested tx.transaction() rolls back alone, tx.rollback() and a caught failed statement commit nothing', async () => {
      const handle = idempotentHandler(
        { mode: 'transaction', db: database().db, scope: () => 'user:ann' },
        async (request, { tx }) => {
          const { tag, how } = (await request.json()) as { tag: string; how: string };
          await tx.execute(sql`insert into fetch_orders (tag) values (${tag})`);
          if (how === 'savepoint') {
            await tx
              .transaction(async (inner) => {
                await inner.execute(sql`insert into fetch_orders (tag) values (${tag})`);
                throw new Error('the inner part fails');
              })
              .catch(() => undefined);
            // A failure caught inside a savepoint still fails it, and rolls it back alone.
            const caughtInside = await tx
              .transaction(async (inner) => {
                await inner.execute(sql`insert into fetch_orders (tag) values (${tag})`);
                await inner.execute(sql`select 1 / 0`).catch(() => undefined);
              })
              .then(
                () => 'resolved',
                () => 'rejected',
              );
            if (caughtInside !== 'rejected')
              return Response.json({ caughtInside }, { status: 500 });
            await tx.transaction(async (inner) => {
              await inner.execute(sql`insert into fetch_orders (tag) values (${tag})`);
            });
          }
          if (how === 'rollback') tx.rollback();
          if (how === 'caught') {
            await tx.execute(sql`select 1 / 0`).catch(() => undefined);
          }
          return Response.json({ tag }, { status: 201 });
        },
      );
      const send = (how: string) => {
        const key = randomUUID();
        return { key, answered: handle(post(key, { tag: key, how })) };
      };
      // The outer write and the second savepoint's commit; the first savepoint's rolled back.
      const savepoint = send('savepoint');
      expect((await savepoint.answered).status).toBe(201);
      expect(await ordersOf(savepoint.key)).toBe(2);
      expect(await recordOf(savepoint.key)).toBe('completed');
      for (const how of ['rollback', 'caught']) {
        const { key, answered } = send(how);
        // The handler's answer did not commit: it fails, and the key stays free.
        const failed: unknown = await answered.then(
          (response) => response.status,
          (error: unknown) => error,
        );
        // tx.rollback()'s own error, or, for a failure the handler caught, that the
        // transaction was aborted (not the store's failure).
        expect(failed).toBeInstanceOf(
          how === 'rollback' ? TransactionRollbackError : TransactionAbortedError,
        );
        expect(await ordersOf(key)).toBe(0);
        expect(await recordOf(key)).toBeUndefined();
      }
    });

    it(`${CONCURRENCY} concurrent duplicates: one execution and one order; the others wait on the key, then replay`, async () => {
      // A generous wait: on a loaded machine the duplicates must outlast the holder.
      const handle = handlerOn(database().db, { inProgress: { waitMs: 60_000 } });
      const key = randomUUID();
      const tag = randomUUID();
      const responses = Array.from({ length: CONCURRENCY }, () =>
        handle(post(key, { tag, gate: true })),
      );
      await gates.arrived(tag);
      const { url } = database();
      if (url) {
        // Every other pooled connection is blocked on the holder's row: the row lock, not
        // luck, keeps them out.
        await untilLockWaiters(url, (waiting) => waiting >= 9, {
          what: 'duplicates to wait on the key',
        });
      }
      gates.open(tag);
      const answered = await Promise.all(responses);
      expect(answered.every((response) => response.status === 200)).toBe(true);
      expect(
        answered.filter((response) => response.headers.get('idempotent-replayed') === 'true'),
      ).toHaveLength(CONCURRENCY - 1);
      const bodies = new Set(await Promise.all(answered.map((response) => response.text())));
      expect([...bodies]).toEqual([JSON.stringify({ order: tag, execution: 1 })]);
      expect(executions.get(tag)).toBe(1);
      expect(await ordersOf(tag)).toBe(1);
    }, 120_000);

    it('a duplicate that waits past inProgress.waitMs is answered 409 problem with Retry-After', async () => {
      // The holder comes through a handler with the default wait: with 100 ms, a loaded
      // machine can keep it from its connection that long, and it would be answered 409
      // itself, before it holds the key. Both handlers keep their keys in the same table.
      const handle = handlerOn(database().db, { inProgress: { waitMs: 100 } });
      const key = randomUUID();
      const tag = randomUUID();
      const holder = handlerOn(database().db)(post(key, { tag, gate: true }));
      await gates.arrived(tag);
      const duplicate = await handle(post(key, { tag, gate: true }));
      expect(duplicate.status).toBe(409);
      expect(duplicate.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(duplicate.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await duplicate.json()).toMatchObject({ code: 'REQUEST_IN_PROGRESS' });
      gates.open(tag);
      expect((await holder).status).toBe(200);
      expect(executions.get(tag)).toBe(1);
      expect(await ordersOf(tag)).toBe(1);
    });

    it('statements: a first request is the read, then claim ‖ writes ‖ completion in one transaction; a replay is one read', async () => {
      const statements: string[] = [];
      const logger: Logger = {
        logQuery: (query) => {
          const text = statementText(query);
          statements.push(
            /^select .* from "idem_keys"/.test(text)
              ? 'read record'
              : /^insert into "idem_keys"|^with "?inserted"? as \(insert into "idem_keys"/.test(
                    text,
                  )
                ? 'claim'
                : /^update "idem_keys" set "status"/.test(text)
                  ? 'complete'
                  : /^insert into fetch_orders/.test(text)
                    ? 'handler: insert order'
                    : text.split(' ').slice(0, 3).join(' '),
          );
        },
      };
      const logged = loggedDatabase(database(), logger);
      try {
        const handle = handlerOn(logged.db);
        const key = randomUUID();
        const tag = randomUUID();
        expect((await handle(post(key, { tag }))).status).toBe(200);
        expect(statements).toEqual([
          'read record',
          ...loggedTransaction(backend, ['claim', 'handler: insert order', 'complete']),
        ]);
        statements.length = 0;
        const replay = await handle(post(key, { tag }));
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(statements).toEqual(['read record']);
      } finally {
        await logged.close();
      }
    });
  });
}

describe('idempotentHandler transaction-mode options', () => {
  it("mode 'transaction' without db, or an unknown mode, throws ConfigurationError at start-up", () => {
    const attempts = [
      () =>
        idempotentHandler(
          { mode: 'transaction', store: memoryStore(), scope: () => 'user:ann' } as never,
          () => new Response('ok'),
        ),
      () =>
        idempotentHandler(
          { mode: 'optimistic', store: memoryStore(), scope: () => 'user:ann' } as never,
          () => new Response('ok'),
        ),
    ];
    for (const attempt of attempts) {
      let caught: unknown;
      try {
        attempt();
      } catch (error) {
        caught = error;
      }
      expect(isConfigurationError(caught)).toBe(true);
      expect(String((caught as Error).message)).toMatch(/mode/);
    }
  });
});

describe('idempotentHandler in transaction mode on postgres-js: round trips', () => {
  const database = useDatabase('Postgres');

  it('a new key costs idem three writes to Postgres: the read, BEGIN with the claim, the completion with COMMIT', async () => {
    // One connection, so that every call finds idem's statements prepared on it after the
    // first (which costs a describe round trip for each).
    const db = connect(postgresUrl(database().url), 1);
    try {
      await db.execute(
        sql`create table if not exists fetch_trips (id serial primary key, tag text not null)`,
      );
      const handle = idempotentHandler(
        { mode: 'transaction', db, scope: () => 'user:ann' },
        async (request, { tx }) => {
          const { tag } = (await request.json()) as { tag: string };
          await tx.execute(sql`insert into fetch_trips (tag) values (${tag})`);
          return Response.json({ tag }, { status: 201 });
        },
      );
      await handle(post(randomUUID(), { tag: randomUUID() }));
      const writes = await socketWritesDuring(async () => {
        const answered = await handle(post(randomUUID(), { tag: randomUUID() }));
        expect(answered.status).toBe(201);
      });
      // Plus the handler's own INSERT: two, as postgres-js describes a statement with
      // parameters before it runs it, unless the app prepares it.
      expect(writes).toBe(3 + 2);
    } finally {
      await db.$client.end({ timeout: 5 });
    }
  });
});
