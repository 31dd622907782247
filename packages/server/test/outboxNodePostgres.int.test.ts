import { manualClock } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { until } from './fixtures/deferred.js';
import { connectNodePostgres, postgresUrl, rows } from './harness.js';
import { events, recordingPublisher, useOutboxDatabase } from './outbox/fixtures.js';

/** The pids of this database's sessions whose last statement was `LISTEN idem_outbox`. */
const listeners = async (db: PgDatabaseLike) =>
  (
    await rows<{ pid: number }>(
      db,
      sql`select pid from pg_stat_activity
          where datname = current_database() and query = 'LISTEN idem_outbox'`,
    )
  ).map((row) => row.pid);

/**
 * What only node-postgres needs of the relay: LISTEN holds a connection of the app's `Pool`
 * (the other drivers' relays are in outboxRelay's suite, which runs on node-postgres too).
 */
describe('relay on node-postgres: LISTEN on a pooled connection', () => {
  const emptyOutbox = useOutboxDatabase('node-postgres');

  /** A relay on its own pool of `max` connections, whose waits end only at a NOTIFY. */
  const sleepingRelay = async (max: number) => {
    const { url } = await emptyOutbox();
    const db = connectNodePostgres(postgresUrl(url), max);
    const clock = manualClock(Date.now() + 60_000);
    const publisher = recordingPublisher();
    const relay = createRelay({ db, publisher, clock, pollIntervalMs: 1_000 });
    const asleep = () =>
      until(() => clock.pendingTimers() === 1, { what: 'the relay to sleep', timeoutMs: 60_000 });
    const published = (count: number) =>
      until(() => publisher.published.length === count, {
        what: `${count} publishes woken by NOTIFY`,
        timeoutMs: 60_000,
      });
    return { db, pool: db.$client, relay, asleep, published };
  };

  it('holds one connection of the pool while running, and gives it back at stop', async () => {
    const { db, pool, relay, asleep, published } = await sleepingRelay(3);
    try {
      await relay.start();
      await asleep();
      // The relay's own statements are done: only the listener's connection is out.
      expect(pool.totalCount - pool.idleCount).toBe(1);
      expect(await listeners(db)).toHaveLength(1);
      await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
      await published(1);
      await relay.stop();
      expect(pool.totalCount - pool.idleCount).toBe(0);
      expect(await listeners(db)).toEqual([]);
    } finally {
      await relay.stop();
      await pool.end();
    }
  });

  it('listens again on another connection after its own is lost, and a NOTIFY wakes it', async () => {
    const { db, pool, relay, asleep, published } = await sleepingRelay(3);
    try {
      await relay.start();
      await asleep();
      const [lost] = await listeners(db);
      await db.execute(sql`select pg_terminate_backend(${lost}::int)`);
      const [again] = await until(
        async () => {
          const found = await listeners(db);
          return found.length === 1 && found[0] !== lost ? found : undefined;
        },
        { what: 'a LISTEN on another connection', timeoutMs: 60_000 },
      );
      expect(again).not.toBe(lost);
      await asleep();
      await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
      await published(1);
    } finally {
      await relay.stop();
      await pool.end();
    }
  });

  it("LISTENs on the app's own Client when the database has one connection", async () => {
    const { url } = await emptyOutbox();
    const client = new pg.Client({ connectionString: postgresUrl(url) });
    await client.connect();
    const db = drizzle(client);
    const clock = manualClock(Date.now() + 60_000);
    const publisher = recordingPublisher();
    const relay = createRelay({ db, publisher, clock, pollIntervalMs: 1_000 });
    try {
      await relay.start();
      await until(() => clock.pendingTimers() === 1, { what: 'the relay to sleep' });
      await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
      await until(() => publisher.published.length === 1, {
        what: 'a publish woken by NOTIFY',
        timeoutMs: 60_000,
      });
      await relay.stop();
      const [listening] = await rows<{ n: number }>(
        db,
        sql`select count(*)::int as n from pg_listening_channels()`,
      );
      expect(listening?.n).toBe(0);
    } finally {
      await relay.stop();
      await client.end();
    }
  });

  it("runs a relay with the database's clock and one with a manual clock on one connection", async () => {
    const { url } = await emptyOutbox();
    const db = connectNodePostgres(postgresUrl(url), 1);
    // Each statement with "now" has two texts; node-postgres prepares a named statement
    // once per connection, so each text needs a name of its own.
    const clock = manualClock(Date.now() + 60_000);
    const publisher = recordingPublisher();
    const relays = [
      createRelay({ db, publisher, listen: false }),
      createRelay({ db, publisher, clock, listen: false, retainSentMs: 60_000 }),
    ];
    try {
      for (const [n, relay] of relays.entries()) {
        await events.enqueue(db, { topic: 'test.numbered', payload: { n } });
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1 });
      }
      expect(publisher.published.map((message) => message.payload)).toEqual([{ n: 0 }, { n: 1 }]);
    } finally {
      await db.$client.end();
    }
  });

  it("runs consumer batches with the database's clock and a manual clock's on one connection", async () => {
    const { url } = await emptyOutbox();
    const db = connectNodePostgres(postgresUrl(url), 1);
    const consumers = [
      idempotentConsumer({ db, name: 'billing' }),
      idempotentConsumer({ db, name: 'shipping', clock: manualClock(Date.now()) }),
    ];
    try {
      for (const consumer of consumers) {
        const results = await consumer.handleBatch(
          [{ id: 'evt-1' }, { id: 'evt-2' }],
          async () => {},
        );
        expect(results.map((result) => result.status)).toEqual(['processed', 'processed']);
      }
    } finally {
      await db.$client.end();
    }
  });
});
