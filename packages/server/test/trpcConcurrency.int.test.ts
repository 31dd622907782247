import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { until } from './fixtures/deferred.js';
import { useTestApp } from './fixtures/testApp.js';
import { countOf, defined, postgresUrl, untilLockWaiters } from './harness.js';
import { mutate, type RawResponse } from './httpClient.js';

const CONCURRENCY = 200;

// Real Postgres only: PGlite has one connection, so nothing there is truly concurrent.
describe(`${CONCURRENCY} concurrent HTTP requests with one key, on Postgres`, () => {
  const app = useTestApp('Postgres');
  const keyed = (key: string) => ({ 'Idempotency-Key': key, 'x-user': 'alice' });

  it('lease mode: exactly one execution; the others get 409, then all replay', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const answered: RawResponse[] = [];
    const requests = Array.from({ length: CONCURRENCY }, () =>
      mutate(app().url, 'gated', { tag }, keyed(key)).then((response) => {
        answered.push(response);
        return response;
      }),
    );
    // The winner holds the key at its gate until every other request has been answered.
    await app().gates.arrived(tag);
    await until(() => answered.length === CONCURRENCY - 1, { what: 'the duplicates' });
    app().gates.open(tag);
    const responses = await Promise.all(requests);

    expect(responses.filter((response) => response.status === 200)).toHaveLength(1);
    const conflicts = responses.filter((response) => response.status === 409);
    expect(conflicts).toHaveLength(CONCURRENCY - 1);
    for (const conflict of conflicts) {
      expect(conflict.error?.data.idempotency?.code).toBe('REQUEST_IN_PROGRESS');
      expect(conflict.headers.get('retry-after')).not.toBeNull();
    }
    expect(app().executionsOf(tag)).toBe(1);

    const retries = await Promise.all(
      Array.from({ length: CONCURRENCY }, () => mutate(app().url, 'gated', { tag }, keyed(key))),
    );
    const winner = defined(
      responses.find((response) => response.status === 200),
      'the answer of the one that ran',
    );
    for (const retry of retries) {
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.data).toEqual(winner.data);
    }
    expect(app().executionsOf(tag)).toBe(1);
  });

  /**
   * Sends CONCURRENCY transaction-mode orders with one key, holds the first at its gate
   * until every other pooled connection waits on the key's lock (the rest queue for a
   * connection: the lock, not luck, keeps them out), then lets it finish.
   */
  const storm = async (input: { tag: string; outcome?: 'declined' }) => {
    const key = randomUUID();
    const requests = Array.from({ length: CONCURRENCY }, () =>
      mutate(app().url, 'txOrder', { ...input, sku: 'book', gate: true }, keyed(key)),
    );
    await app().gates.arrived(input.tag);
    await untilLockWaiters(postgresUrl(app().databaseUrl), (waiting) => waiting >= 9, {
      what: 'duplicates to wait on the key',
    });
    app().gates.open(input.tag);
    const responses = await Promise.all(requests);
    expect(
      responses.filter((response) => response.headers.get('idempotent-replayed') === 'true'),
    ).toHaveLength(CONCURRENCY - 1);
    expect(app().executionsOf(input.tag)).toBe(1);
    const orders = await countOf(
      app().db,
      sql`select count(*)::int as n from orders where tag = ${input.tag}`,
    );
    return { responses, orders };
  };

  it('transaction mode: exactly one execution and one order; every duplicate waits and replays', async () => {
    const { responses, orders } = await storm({ tag: randomUUID() });
    expect(responses.every((response) => response.status === 200)).toBe(true);
    const original = defined(
      responses.find((response) => !response.headers.get('idempotent-replayed')),
      'the answer of the one that ran',
    );
    for (const response of responses) expect(response.data).toEqual(original.data);
    expect(orders).toBe(1);
  });

  // The holder rolls its order back and stores the refusal while they wait: none of them
  // may take the key in between and run the procedure again.
  it('transaction mode, a deterministic error: one execution; the duplicates wait through the rollback and replay the stored error', async () => {
    const { responses, orders } = await storm({ tag: randomUUID(), outcome: 'declined' });
    expect(responses.every((response) => response.status === 402)).toBe(true);
    for (const response of responses) expect(response.error?.message).toBe('The card was declined');
    expect(orders).toBe(0);
  });
});
