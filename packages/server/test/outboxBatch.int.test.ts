import { manualClock, seededRandom } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { inProcessPublisher } from '../src/outbox/publishers/inProcessPublisher.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { RelayEvent } from '../src/outbox/relay/RelayEvent.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { backends, connect, postgresUrl, rows } from './harness.js';
import {
  effectCounts,
  events,
  outboxRows,
  reportingConsumer,
  useOutboxDatabase,
} from './outbox/fixtures.js';

/** The consumer's writes for a batch: one multi-row INSERT, as a batch handler should. */
const recordEffects = async (tx: PgDatabaseLike, ids: readonly string[]) => {
  if (ids.length === 0) return;
  await tx.execute(
    sql`insert into outbox_test_effects (event_id) values ${sql.join(
      ids.map((id) => sql`(${id})`),
      sql`, `,
    )}`,
  );
};

const inboxIds = async (db: PgDatabaseLike, consumer: string) =>
  (
    await rows<{ event_id: string }>(
      db,
      sql`select event_id from idem_inbox where consumer = ${consumer} order by event_id`,
    )
  ).map((row) => row.event_id);

for (const backend of backends) {
  describe(`batch consumption on ${backend}`, () => {
    const fresh = useOutboxDatabase(backend);

    it('filters out copies already handled (or repeated in the batch) before the handler sees them', async () => {
      const { db } = await fresh();
      const { consumer: billing, reported } = reportingConsumer(db);
      await billing.handle({ id: 'e-2' }, (tx) => recordEffects(tx, ['e-2']));
      await billing.handle({ id: 'e-5' }, (tx) => recordEffects(tx, ['e-5']));
      reported.length = 0;

      const batch = ['e-1', 'e-2', 'e-3', 'e-4', 'e-5', 'e-3', 'e-6'].map((id) => ({ id }));
      const calls: string[][] = [];
      const results = await billing.handleBatch(batch, async (handled, tx) => {
        calls.push(handled.map((event) => event.id));
        await recordEffects(
          tx,
          handled.map((event) => event.id),
        );
      });

      expect(calls).toEqual([['e-1', 'e-3', 'e-4', 'e-6']]);
      expect(results.map((result) => [result.id, result.status])).toEqual([
        ['e-1', 'processed'],
        ['e-2', 'duplicate'],
        ['e-3', 'processed'],
        ['e-4', 'processed'],
        ['e-5', 'duplicate'],
        ['e-3', 'duplicate'],
        ['e-6', 'processed'],
      ]);
      expect(await effectCounts(db)).toEqual(
        new Map(['e-1', 'e-2', 'e-3', 'e-4', 'e-5', 'e-6'].map((id) => [id, 1])),
      );
      expect(reported).toHaveLength(7);
      expect(reported.every((event) => event.batchSize === 7)).toBe(true);

      // The same batch again: nothing left for the handler.
      const again = await billing.handleBatch(batch, async () => {
        throw new Error('must not run');
      });
      expect(again.every((result) => result.status === 'duplicate')).toBe(true);
    });

    it('isolates a poison event: its neighbours commit, it fails alone and rolls back alone', async () => {
      const { db } = await fresh();
      const billing = idempotentConsumer({ db, name: 'billing' });
      const ids = Array.from({ length: 20 }, (_, n) => `e-${String(n).padStart(2, '0')}`);
      const poison = 'e-07';
      const groups: number[] = [];
      const failedGroups: number[] = [];
      const results = await billing.handleBatch(
        ids.map((id) => ({ id })),
        async (handled, tx) => {
          groups.push(handled.length);
          // The writes happen before the failure: they must roll back with it.
          await recordEffects(
            tx,
            handled.map((event) => event.id),
          );
          if (handled.some((event) => event.id === poison)) {
            failedGroups.push(handled.length);
            throw new Error('poison');
          }
        },
      );
      expect(results.filter((result) => result.status === 'processed')).toHaveLength(19);
      expect(results.find((result) => result.id === poison)).toMatchObject({
        status: 'failed',
        error: new Error('poison'),
      });
      expect(await effectCounts(db)).toEqual(
        new Map(ids.filter((id) => id !== poison).map((id) => [id, 1])),
      );
      expect(await inboxIds(db, 'billing')).toEqual(ids.filter((id) => id !== poison));
      // Halving: a handful of smaller transactions, not one per event; the last one alone.
      expect(groups[0]).toBe(20);
      expect(failedGroups).toEqual([20, 10, 5, 3, 1]);
      expect(groups.length).toBeLessThan(2 * Math.ceil(Math.log2(20)) + 2);

      // Redelivered once cured, it is processed; its neighbours are duplicates.
      const retry = await billing.handleBatch(
        ids.map((id) => ({ id })),
        (handled, tx) =>
          recordEffects(
            tx,
            handled.map((event) => event.id),
          ),
      );
      expect(retry.filter((result) => result.status === 'processed')).toEqual([
        { id: poison, status: 'processed' },
      ]);
      expect(await effectCounts(db)).toEqual(new Map(ids.map((id) => [id, 1])));
    });

    it('reports every event failed, without calling the handler, when the inbox cannot be written', async () => {
      const { db } = await fresh();
      const billing = idempotentConsumer({ db, name: 'billing' });
      await db.execute(sql`alter table idem_inbox rename to idem_inbox_away`);
      let called = 0;
      try {
        const results = await billing.handleBatch([{ id: 'a' }, { id: 'b' }], async () => {
          called++;
        });
        expect(called).toBe(0);
        expect(results.map((result) => result.status)).toEqual(['failed', 'failed']);
      } finally {
        await db.execute(sql`alter table idem_inbox_away rename to idem_inbox`);
      }
    });

    it('a relay feeds a batch handler: one transaction for the batch, the poison retried alone and dead-lettered', async () => {
      const { db } = await fresh();
      const clock = manualClock(Date.now() + 60_000);
      const billing = idempotentConsumer({ db, name: 'billing' });
      const batches: number[] = [];
      const log: RelayEvent[] = [];
      const relay = createRelay({
        db,
        clock,
        batchSize: 50,
        maxAttempts: 3,
        backoff: { baseDelayMs: 1_000, maxDelayMs: 1_000, random: seededRandom(3) },
        onEvent: (event) => log.push(event),
        publisher: inProcessPublisher(
          {
            'test.numbered': {
              batch: (numbered) =>
                billing.handleBatch(numbered, async (handled, tx) => {
                  batches.push(handled.length);
                  await recordEffects(
                    tx,
                    handled.map((event) => event.id),
                  );
                  if (handled.some((event) => event.payload.poison)) throw new Error('poison');
                }),
            },
            'order.placed': () => {},
          },
          { events },
        ),
      });
      const ids = await db.transaction((tx) =>
        events.enqueue(
          tx,
          Array.from({ length: 40 }, (_, n) => ({
            topic: 'test.numbered' as const,
            payload: { n, ...(n === 13 ? { poison: true } : {}) },
          })),
        ),
      );
      const poison = ids[13] as string;

      expect(await relay.runOnce()).toMatchObject({ claimed: 40, published: 39, retried: 1 });
      expect(batches[0]).toBe(40);
      expect(await effectCounts(db)).toEqual(
        new Map(ids.filter((id) => id !== poison).map((id) => [id, 1])),
      );
      // Retried alone: the only event due is the poison, and its batch is itself.
      for (let round = 0; round < 2; round++) {
        clock.advance(1_000);
        batches.length = 0;
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 0 });
        expect(batches).toEqual([1]);
      }
      expect(log.filter((event) => event.type !== 'published').map((event) => event.type)).toEqual([
        'publish_failed',
        'publish_failed',
        'dead_lettered',
      ]);
      expect((await relay.deadLetters()).map((dead) => [dead.id, dead.attempts])).toEqual([
        [poison, 3],
      ]);
      expect((await outboxRows(db)).map((row) => [row.id, row.dead])).toEqual([[poison, true]]);
    });

    if (backend === 'Postgres') {
      it('handles overlapping batches on separate connections: every event once, no deadlock', async () => {
        const { db, url } = await fresh();
        const clients = Array.from({ length: 4 }, () => connect(postgresUrl(url), 2));
        try {
          const ids = Array.from({ length: 200 }, (_, n) => `e-${n}`);
          // Each of 8 batches takes 100 of the ids, in its own shuffled order.
          const random = seededRandom(11);
          const batches = Array.from({ length: 8 }, () =>
            ids
              .filter(() => random() < 0.5)
              .sort(() => random() - 0.5)
              .map((id) => ({ id })),
          );
          const results = await Promise.all(
            batches.map((batch, index) =>
              idempotentConsumer({
                db: clients[index % 4] as PgDatabaseLike,
                name: 'billing',
              }).handleBatch(batch, (handled, tx) =>
                recordEffects(
                  tx,
                  handled.map((event) => event.id),
                ),
              ),
            ),
          );
          expect(results.flat().filter((result) => result.status === 'failed')).toEqual([]);
          const covered = new Set(batches.flat().map((event) => event.id));
          const counts = await effectCounts(db);
          expect(counts.size).toBe(covered.size);
          expect([...counts.values()].every((count) => count === 1)).toBe(true);
          expect(results.flat().filter((result) => result.status === 'processed')).toHaveLength(
            covered.size,
          );
        } finally {
          await Promise.all(clients.map((client) => client.$client.end()));
        }
      });
    }
  });
}
