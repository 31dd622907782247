import { seededRandom } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { Relay } from '../src/outbox/relay/Relay.js';
import { deferred, until } from './fixtures/deferred.js';
import { connect, rows } from './harness.js';
import { events, outboxRows, recordingPublisher, useOutboxDatabase } from './outbox/fixtures.js';

/** Several relays, each on its own connection pool, as on separate machines. */
function relayFleet(
  url: string,
  count: number,
  options: Omit<Parameters<typeof createRelay>[0], 'db'>,
) {
  const clients = Array.from({ length: count }, () => connect(url, 3));
  const relays = clients.map((db) => createRelay({ db, ...options }));
  return {
    relays,
    async start() {
      await Promise.all(relays.map((relay) => relay.start()));
    },
    async close() {
      await Promise.all(relays.map((relay) => relay.stop()));
      await Promise.all(clients.map((db) => db.$client.end()));
    },
  };
}

const publishedTotal = async (relays: Relay[]) =>
  (await Promise.all(relays.map((relay) => relay.stats()))).reduce(
    (sum, stats) => sum + stats.published,
    0,
  );

describe('relays at scale on Postgres', () => {
  const emptyOutbox = useOutboxDatabase('Postgres');
  /** Closed after each test: a relay left running would publish the next test's events. */
  let opened: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(opened.map((resource) => resource.close()));
    opened = [];
  });

  it('three relays publish 10,000 events: every one, exactly once', async () => {
    const { db, url } = await emptyOutbox();
    const publisher = recordingPublisher();
    const fleet = relayFleet(url as string, 3, { publisher, batchSize: 200, pollIntervalMs: 50 });
    opened.push(fleet);
    await fleet.start();

    // Four producers, 20 transactions of 500, while the relays run.
    const producers = connect(url as string, 4);
    opened.push({ close: () => producers.$client.end() });
    const ids = (
      await Promise.all(
        Array.from({ length: 4 }, async (_, producer) => {
          const mine: string[] = [];
          for (let batch = 0; batch < 5; batch++) {
            const list = Array.from({ length: 500 }, (_, index) => ({
              topic: 'test.numbered' as const,
              payload: { n: producer * 10_000 + batch * 500 + index },
            }));
            mine.push(...(await producers.transaction((tx) => events.enqueue(tx, list))));
          }
          return mine;
        }),
      )
    ).flat();
    expect(new Set(ids).size).toBe(10_000);

    await until(() => publisher.counts.size === 10_000, {
      timeoutMs: 40_000,
      what: 'all 10,000 events to be published',
    });
    await until(async () => (await publishedTotal(fleet.relays)) === 10_000, {
      what: 'every publish to be settled',
    });
    expect([...publisher.counts.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(publisher.counts.keys())).toEqual(new Set(ids));
    const [left] = await rows<{ n: string | number }>(
      db,
      sql`select count(*) as n from idem_outbox`,
    );
    expect(Number(left?.n)).toBe(0);
    expect(await fleet.relays[0]?.stats()).toMatchObject({
      backlog: 0,
      dead: 0,
      oldestUnsentAgeMs: null,
    });
  });

  it('keeps each aggregate in order with several relays and interleaved, late-committing producers', async () => {
    const { db, url } = await emptyOutbox();
    const random = seededRandom(42);
    const publishOrder: string[] = [];
    const publisher = recordingPublisher(async (message) => {
      publishOrder.push(message.id);
      // Uneven publish times, so relays overtake each other.
      for (let turn = Math.floor(random() * 3); turn > 0; turn--) {
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    const fleet = relayFleet(url as string, 3, {
      publisher,
      ordered: true,
      batchSize: 10,
      pollIntervalMs: 20,
    });
    opened.push(fleet);
    await fleet.start();

    const producers = connect(url as string, 12);
    opened.push({ close: () => producers.$client.end() });
    const aggregates = ['A', 'B', 'C', 'D', 'E', 'F'];
    const lateIds: string[] = [];
    /** Every event's place in the outbox, read in its own transaction: relays delete rows. */
    const enqueued: { id: string; seq: number; aggregate_key: string | null }[] = [];
    const produce = async (worker: number) => {
      for (let round = 0; round < 12; round++) {
        const aggregateKey = aggregates[(worker * 7 + round * 3) % aggregates.length] as string;
        const late = (worker + round) % 4 === 0;
        await producers.transaction(async (tx) => {
          const ids = await events.enqueue(tx, [
            { topic: 'test.numbered', aggregateKey, payload: { n: worker * 100 + round } },
            { topic: 'test.numbered', aggregateKey, payload: { n: worker * 100 + round + 50 } },
            // Unordered events committing late must not be skipped either.
            { topic: 'test.numbered', payload: { n: -1 } },
          ]);
          const written = await rows<{ id: string; seq: number; aggregate_key: string | null }>(
            tx,
            sql`select id::text as id, seq::float8 as seq, aggregate_key from idem_outbox
                where id = any(${`{${ids.join(',')}}`}::uuid[])`,
          );
          enqueued.push(...written);
          if (late) {
            lateIds.push(...ids);
            // Hold the transaction open until events enqueued after it were published
            // (bounded: producers blocked on this aggregate cannot help).
            const seen = publishOrder.length;
            await until(() => publishOrder.length >= seen + 5, { timeoutMs: 300 }).catch(() => {});
          }
        });
      }
    };
    await Promise.all(Array.from({ length: 10 }, (_, worker) => produce(worker)));
    const total = 10 * 12 * 3;

    await until(async () => (await publishedTotal(fleet.relays)) === total, {
      timeoutMs: 30_000,
      what: `all ${total} events to be published`,
    });
    expect(lateIds.length).toBeGreaterThan(0);
    expect([...publisher.counts.values()].every((count) => count === 1)).toBe(true);
    expect(await outboxRows(db)).toEqual([]);
    expect(enqueued).toHaveLength(total);
    enqueued.sort((a, b) => a.seq - b.seq);
    expect(lateIds.every((id) => publisher.counts.get(id) === 1)).toBe(true);

    const position = new Map(publishOrder.map((id, index) => [id, index]));
    for (const aggregate of aggregates) {
      const inSeqOrder = enqueued
        .filter((row) => row.aggregate_key === aggregate)
        .map((row) => row.id);
      const inPublishOrder = [...inSeqOrder].sort(
        (a, b) => (position.get(a) ?? 0) - (position.get(b) ?? 0),
      );
      expect(inPublishOrder, `aggregate ${aggregate}`).toEqual(inSeqOrder);
    }
  });

  it('makes a second producer of an aggregate wait for the first one’s commit, so seq order is commit order', async () => {
    const { db, url } = await emptyOutbox();
    const producers = connect(url as string, 2);
    opened.push({ close: () => producers.$client.end() });
    const publisher = recordingPublisher();
    const relay = createRelay({ db, publisher, ordered: true });
    const commitFirst = deferred();
    let firstId = '';
    const first = producers.transaction(async (tx) => {
      firstId = await events.enqueue(tx, {
        topic: 'test.numbered',
        aggregateKey: 'K',
        payload: { n: 1 },
      });
      await commitFirst.promise;
    });
    await until(() => firstId !== '', { what: 'the first producer to enqueue' });
    const second = producers.transaction((tx) =>
      events.enqueue(tx, { topic: 'test.numbered', aggregateKey: 'K', payload: { n: 2 } }),
    );
    const waiting = async () => {
      const [row] = await rows<{ n: string | number }>(
        db,
        sql`select count(*) as n from pg_locks
            where locktype = 'advisory' and not granted and objsubid = 2
              and database = (select oid from pg_database where datname = current_database())`,
      );
      return Number(row?.n) === 1;
    };
    await until(waiting, { what: 'the second producer to wait on the aggregate lock' });
    // Nothing of K is visible yet, so nothing of K can be published.
    expect(await relay.runOnce()).toMatchObject({ claimed: 0 });

    commitFirst.resolve();
    await first;
    const secondId = await second;
    expect((await outboxRows(db)).map((row) => row.id)).toEqual([firstId, secondId]);
    await relay.runOnce();
    await relay.runOnce();
    expect(publisher.published.map((message) => message.id)).toEqual([firstId, secondId]);
  });
});
