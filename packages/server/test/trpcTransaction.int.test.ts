import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { until } from './fixtures/deferred.js';
import { type OrderInput, useTestApp } from './fixtures/testApp.js';
import { backends, countOf, rows, untilLockWaiters } from './harness.js';
import { idempotencyData, mutate, type RawResponse } from './httpClient.js';

for (const backend of backends) {
  describe(`idempotent() in transaction mode over HTTP on ${backend}`, () => {
    const app = useTestApp(backend);
    const keyed = (key: string, user = 'alice') => ({ 'Idempotency-Key': key, 'x-user': user });

    const ordersOf = (tag: string) =>
      countOf(app().db, sql`select count(*)::int as n from orders where tag = ${tag}`);
    const recordOf = async (key: string) =>
      (
        await rows<{ status: string; kind: string | null }>(
          app().db,
          sql`select status, outcome->>'kind' as kind from idem_keys where key = ${key}`,
        )
      )[0];
    const txOrder = (input: OrderInput, key: string, user?: string) =>
      mutate(app().url, 'txOrder', input, keyed(key, user));
    /** Places `order`, with a new tag, under a new key: both, the input and the first answer. */
    const newOrder = async (order: Omit<OrderInput, 'tag'>) => {
      const key = randomUUID();
      const input = { ...order, tag: randomUUID() };
      return { key, tag: input.tag, input, first: await txOrder(input, key) };
    };
    /**
     * Sends `input` again under `key`: the `first` answer again, marked replayed, without
     * running the procedure again; `orders` orders of its tag stay written.
     */
    const expectReplay = async (
      input: OrderInput,
      key: string,
      first: RawResponse,
      orders: number,
    ) => {
      const replay = await txOrder(input, key);
      expect(replay.status).toBe(first.status);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(app().executionsOf(input.tag)).toBe(1);
      expect(await ordersOf(input.tag)).toBe(orders);
    };

    it.each([
      {
        what: 'commits the claim, the writes and the completion together; a replay writes nothing',
        order: { sku: 'book' },
        answer: { status: 200, data: { execution: 1, lockTimeout: '0' } },
        kind: 'success',
        orders: 1,
      },
      {
        what: 'on a deterministic error rolls back the writes but stores the error, and replays it',
        order: { sku: 'book', outcome: 'declined' as const },
        answer: {
          status: 402,
          error: { message: 'The card was declined', data: { declineCode: 'insufficient_funds' } },
        },
        kind: 'error',
        orders: 0,
      },
    ])('$what', async ({ order, answer, kind, orders }) => {
      const { key, tag, input, first } = await newOrder(order);
      expect(first).toMatchObject(answer);
      expect(await ordersOf(tag)).toBe(orders);
      expect(await recordOf(key)).toEqual({ status: 'completed', kind });
      await expectReplay(input, key, first, orders);
    });

    it('after a statement of the procedure aborted the transaction: nothing stored, its own error answered, the retry runs', async () => {
      const { key, tag, input, first } = await newOrder({ sku: 'book', outcome: 'aborted' });
      expect(first.status).toBe(400);
      expect(first.error?.message).toBe('The order could not be written');
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
      const retried = await txOrder(input, key);
      expect(retried.status).toBe(400);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(app().executionsOf(tag)).toBe(2);
      // The key lock went with the transaction: the same key with a good input commits.
      const fixed = await txOrder({ tag, sku: 'book' }, key);
      expect(fixed.status).toBe(200);
      expect(await ordersOf(tag)).toBe(1);
    });

    it('never commits the writes without the completion: a procedure that deleted its own key gets 409 LEASE_LOST, nothing is written, the retry runs', async () => {
      // The completion goes out with the COMMIT behind it (postgres-js pipelines them); the
      // completion finding no row must turn that COMMIT into a rollback.
      const { key, tag, input, first } = await newOrder({ sku: 'book', outcome: 'tampered' });
      expect(first.status).toBe(409);
      expect(first.error?.data.idempotency).toMatchObject({ code: 'LEASE_LOST' });
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
      const fixed = await txOrder({ ...input, outcome: 'ok' }, key);
      expect(fixed.status).toBe(200);
      expect(fixed.headers.get('idempotent-replayed')).toBeNull();
      expect(await ordersOf(tag)).toBe(1);
      expect(app().executionsOf(tag)).toBe(2);
    });

    it('on a transient error rolls back everything and frees the key; the retry runs and commits', async () => {
      const { key, tag, input, first } = await newOrder({
        sku: 'book',
        outcome: 'transient',
        failures: 1,
      });
      expect(first.status).toBe(500);
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
      const retried = await txOrder(input, key);
      expect(retried.status).toBe(200);
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
      expect(retried.data).toMatchObject({ execution: 2 });
      expect(await ordersOf(tag)).toBe(1);
      expect(app().executionsOf(tag)).toBe(2);
    });

    it("when the server refuses the COMMIT (a deferred constraint): the procedure's failure, not the store's, nothing stored, the retry runs and commits", async () => {
      const { key, tag, input, first } = await newOrder({ sku: 'book', outcome: 'clashAtCommit' });
      // As the same procedure in a plain db.transaction would fail: its writes did not commit.
      expect(first).toMatchObject({
        status: 500,
        error: { data: { code: 'INTERNAL_SERVER_ERROR' } },
      });
      expect(first.error?.message).toContain('order_tags_once');
      expect(first.error?.data).not.toHaveProperty('idempotency');
      expect(await ordersOf(tag)).toBe(0);
      expect(await recordOf(key)).toBeUndefined();
      const retried = await txOrder(input, key);
      expect(retried.status).toBe(200);
      expect(retried.data).toMatchObject({ execution: 2 });
      expect(await ordersOf(tag)).toBe(1);
      expect(await recordOf(key)).toEqual({ status: 'completed', kind: 'success' });
    });

    it('makes a concurrent duplicate wait on the row lock, then replay', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const user = `user-${randomUUID()}`;
      const input = { tag, sku: 'book', gate: true };
      const first = txOrder(input, key, user);
      await app().gates.arrived(tag);
      const duplicate = txOrder(input, key, user);
      const { databaseUrl } = app();
      if (databaseUrl) {
        // Real Postgres: see the duplicate's claim blocked on the first one's row.
        await untilLockWaiters(databaseUrl, (waiting) => waiting === 1, {
          what: 'the duplicate to wait on the key',
        });
      } else {
        // PGlite has one connection: the duplicate queues for it behind the open transaction.
        await until(() => app().scopeCalls.get(user) === 2, { what: 'the duplicate to arrive' });
      }
      app().gates.open(tag);
      const [original, replay] = await Promise.all([first, duplicate]);
      expect(original.status).toBe(200);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(original.text);
      expect(app().executionsOf(tag)).toBe(1);
      expect(await ordersOf(tag)).toBe(1);
    });

    // On Postgres the duplicate waits on the row lock (lock_timeout); on PGlite, which has
    // one connection, it waits for the connection, bounded before its transaction starts.
    it('answers a duplicate that waited past inProgress.waitMs with 409 and Retry-After', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const input = { tag, sku: 'book', gate: true };
      const { answer: first } = await holderOf(
        () => mutate(app().url, 'txOrderShortWait', input, keyed(key)),
        app().gates.arrived(tag),
      );
      const startedAt = Date.now();
      const duplicate = await mutate(app().url, 'txOrderShortWait', input, keyed(key));
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(300);
      expect(duplicate.status).toBe(409);
      expect(duplicate.error?.data.idempotency).toEqual(
        idempotencyData('REQUEST_IN_PROGRESS', { retryAfterMs: 1000 }),
      );
      expect(duplicate.headers.get('retry-after')).toBe('1');
      expect(duplicate.headers.get('idempotency-status')).toBe('in-progress');
      app().gates.open(tag);
      const original = await first;
      expect(original.status).toBe(200);
      const retry = await mutate(app().url, 'txOrderShortWait', input, keyed(key));
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(1);
      expect(await ordersOf(tag)).toBe(1);
    });

    it('keeps the scope per user: the same key of another user is another order', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const alice = await txOrder({ tag, sku: 'x' }, key, 'alice');
      const bob = await txOrder({ tag, sku: 'x' }, key, 'bob');
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
      expect(bob.data).toMatchObject({ execution: 2 });
      expect((bob.data as { orderId: number }).orderId).not.toBe(
        (alice.data as { orderId: number }).orderId,
      );
      expect(await ordersOf(tag)).toBe(2);
    });
  });
}

/**
 * Sends the first call of a key until it holds the key (arrived at its gate) and gives its
 * pending answer (wrapped: an async function's promise would wait for it). With a short `inProgress.waitMs`, a loaded machine can keep even the
 * first call from a connection that long: it is then answered 409 without holding the key,
 * and sent again, as a client would.
 */
async function holderOf(
  send: () => Promise<RawResponse>,
  arrived: Promise<void>,
): Promise<{ answer: Promise<RawResponse> }> {
  for (let sent = 1; ; sent++) {
    const call = send();
    const first = await Promise.race([arrived.then(() => 'arrived' as const), call]);
    if (first === 'arrived') return { answer: call };
    expect(first.status, 'the first call, answered before it held the key').toBe(409);
    if (sent === 20) throw new Error('the first call never got to hold its key in 20 tries');
  }
}
