import { backoffDelay, isConfigurationError } from '@idem/core';
import { manualClock, seededRandom } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import type { OutboxMessage } from '../src/outbox/OutboxMessage.js';
import { inProcessPublisher } from '../src/outbox/publishers/inProcessPublisher.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { RelayEvent } from '../src/outbox/relay/RelayEvent.js';
import type { RelayOptions } from '../src/outbox/relay/RelayOptions.js';
import { deferred } from './fixtures/deferred.js';
import { driverBackends } from './harness.js';
import {
  effectCounts,
  events,
  outboxRows,
  recordingPublisher,
  useOutboxDatabase,
  waitFor,
} from './outbox/fixtures.js';

const BACKOFF = { baseDelayMs: 1_000, maxDelayMs: 8_000 };
const LEASE_MS = 10_000;

for (const backend of driverBackends) {
  describe(`relay on ${backend}`, () => {
    const emptyOutbox = useOutboxDatabase(backend);

    describe('driven by runOnce and a manual clock', () => {
      const fresh = async () => {
        const { db } = await emptyOutbox();
        // Ahead of real time: rows stamped by the database's now() are due at once.
        const clock = manualClock(Date.now() + 60_000);
        const log: RelayEvent[] = [];
        const relayWith = (options: Partial<RelayOptions> & Pick<RelayOptions, 'publisher'>) =>
          createRelay({
            db,
            clock,
            leaseMs: LEASE_MS,
            backoff: { ...BACKOFF, random: seededRandom(7) },
            onEvent: (event) => log.push(event),
            ...options,
          });
        const enqueueNumbered = (count: number, aggregateKey?: (n: number) => string) =>
          db.transaction((tx) =>
            events.enqueue(
              tx,
              Array.from({ length: count }, (_, n) => ({
                topic: 'test.numbered' as const,
                payload: { n },
                ...(aggregateKey ? { aggregateKey: aggregateKey(n) } : {}),
              })),
            ),
          );
        return { db, clock, log, relayWith, enqueueNumbered };
      };

      it('publishes due events in order, deletes them, and reports each', async () => {
        const { db, log, relayWith, enqueueNumbered } = await fresh();
        const ids = await enqueueNumbered(5);
        const publisher = recordingPublisher();
        const relay = relayWith({ publisher, batchSize: 3 });

        expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 3 });
        expect(await relay.runOnce()).toMatchObject({ claimed: 2, published: 2 });
        expect(await relay.runOnce()).toMatchObject({ claimed: 0 });
        expect(publisher.published.map((message) => message.id)).toEqual(ids);
        expect(publisher.published[0]).toMatchObject({
          topic: 'test.numbered',
          payload: { n: 0 },
          aggregateKey: null,
          headers: {},
        });
        expect(await outboxRows(db)).toEqual([]);
        expect(log.filter((event) => event.type === 'published')).toHaveLength(5);
        expect(await relay.stats()).toEqual({
          backlog: 0,
          oldestUnsentAgeMs: null,
          dead: 0,
          published: 5,
          failed: 0,
          deadLettered: 0,
        });
      });

      it('records a failure, backs off with jitter, and publishes on the next try', async () => {
        const { db, clock, log, relayWith, enqueueNumbered } = await fresh();
        const [id] = await enqueueNumbered(1);
        let fail = true;
        const publisher = recordingPublisher(() => {
          if (fail) throw new Error('broker said no');
        });
        const relay = relayWith({ publisher });

        expect(await relay.runOnce()).toMatchObject({ claimed: 1, retried: 1 });
        const expectedDelay = backoffDelay({ attempt: 0, ...BACKOFF, random: seededRandom(7) });
        const [row] = await outboxRows(db, clock.now());
        expect(row).toMatchObject({ attempts: 1, sent: false, dead: false, locked: false });
        expect(row?.last_error).toBe('Error: broker said no');
        expect(row?.available_in_ms).toBeCloseTo(expectedDelay, -1);
        expect(log).toContainEqual(
          expect.objectContaining({ type: 'publish_failed', id, attempts: 1 }),
        );

        fail = false;
        clock.advance(Math.max(0, expectedDelay - 50));
        expect(await relay.runOnce()).toMatchObject({ claimed: 0 });
        clock.advance(100);
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1 });
        expect(await outboxRows(db)).toEqual([]);
        expect((await relay.stats()).failed).toBe(1);
      });

      it('dead-letters a poison event after maxAttempts while the others flow; redrive brings it back', async () => {
        const { db, clock, log, relayWith, enqueueNumbered } = await fresh();
        const ids = await enqueueNumbered(6);
        const poisonId = ids[2] as string;
        let cured = false;
        const publisher = recordingPublisher((message) => {
          if (message.id === poisonId && !cured) throw new Error(`poison ${message.id}`);
        });
        const relay = relayWith({ publisher, batchSize: 2, maxAttempts: 3 });

        for (let round = 0; round < 10; round++) {
          await relay.runOnce();
          clock.advance(BACKOFF.maxDelayMs);
        }
        expect(new Set(publisher.published.map((message) => message.id))).toEqual(
          new Set(ids.filter((id) => id !== poisonId)),
        );
        const [dead, ...more] = await relay.deadLetters();
        expect(more).toEqual([]);
        expect(dead).toMatchObject({
          id: poisonId,
          topic: 'test.numbered',
          payload: { n: 2 },
          attempts: 3,
          lastError: `Error: poison ${poisonId}`,
        });
        expect(dead?.deadAt).toBeInstanceOf(Date);
        expect(log.filter((event) => event.type === 'dead_lettered')).toEqual([
          expect.objectContaining({ id: poisonId, attempts: 3 }),
        ]);
        expect(await relay.stats()).toMatchObject({
          backlog: 0,
          dead: 1,
          published: 5,
          deadLettered: 1,
        });
        expect(await relay.runOnce()).toMatchObject({ claimed: 0 });

        cured = true;
        expect(await relay.redrive([poisonId, ids[0] as string])).toEqual([poisonId]);
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1 });
        expect(await relay.deadLetters()).toEqual([]);
        expect(await outboxRows(db)).toEqual([]);
      });

      it('never dead-letters while the publisher is unreachable (transient errors)', async () => {
        const { db, clock, relayWith, enqueueNumbered } = await fresh();
        await enqueueNumbered(3);
        let down = true;
        const publisher = {
          ...recordingPublisher(() => {
            if (down) throw Object.assign(new Error('connection refused'), { transient: true });
          }),
          isTransientError: (error: unknown) =>
            (error as { transient?: boolean }).transient === true,
        };
        const relay = relayWith({ publisher, maxAttempts: 2 });
        for (let round = 0; round < 5; round++) {
          expect(await relay.runOnce()).toMatchObject({ claimed: 3, released: 3 });
          clock.advance(1);
        }
        const rows = await outboxRows(db);
        expect(rows.every((row) => row.attempts === 0 && !row.dead && !row.locked)).toBe(true);
        expect(rows[0]?.last_error).toContain('connection refused');
        down = false;
        expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 3 });
      });

      it('gives a crashed relay’s events to another after the lease; the effect still happens once', async () => {
        const { db, clock, log, relayWith, enqueueNumbered } = await fresh();
        const [id] = await enqueueNumbered(1);
        const billing = idempotentConsumer({ db, name: 'billing' });
        const duplicates: string[] = [];
        const consume = async (event: OutboxMessage) => {
          const result = await billing.handle(event, async (tx) => {
            await tx.execute(sql`insert into outbox_test_effects (event_id) values (${event.id})`);
          });
          if (result.status === 'duplicate') duplicates.push(event.id);
        };
        const handed = recordingPublisher();
        const hang = deferred();
        // Relay A delivers, then "crashes": it never gets to mark the event sent.
        const crashing = relayWith({
          publisher: inProcessPublisher({
            'test.numbered': async (event) => {
              await consume(event);
              await handed.publish(event);
              await hang.promise;
            },
          }),
        });
        const crashed = crashing.runOnce();
        await waitFor(() => handed.published.length === 1, { what: 'the first delivery' });

        const laterClock = manualClock(clock.now() + LEASE_MS + 1);
        const survivor = createRelay({
          db,
          clock: laterClock,
          publisher: inProcessPublisher({ 'test.numbered': consume }),
        });
        expect(await survivor.runOnce()).toMatchObject({ claimed: 1, published: 1 });
        expect(duplicates).toEqual([id]);
        expect(await effectCounts(db)).toEqual(new Map([[id, 1]]));

        // The zombie wakes up: its late outcome is fenced off.
        hang.resolve();
        expect(await crashed).toMatchObject({ claimed: 1, published: 0, leaseLost: 1 });
        expect(log).toContainEqual({ type: 'lease_lost', ids: [id] });
        expect(await outboxRows(db)).toEqual([]);
      });

      it('with ordered, holds an aggregate behind its failing or dead head, and lets others pass', async () => {
        const { db, clock, relayWith } = await fresh();
        const enqueue = (aggregateKey: string, n: number) =>
          events.enqueue(db, { topic: 'test.numbered', aggregateKey, payload: { n } });
        const k1 = await enqueue('K', 1);
        const m1 = await enqueue('M', 1);
        const k2 = await enqueue('K', 2);
        const m2 = await enqueue('M', 2);
        const free = await events.enqueue(db, { topic: 'test.numbered', payload: { n: 0 } });
        const failing = new Set([k1]);
        const publisher = recordingPublisher((message) => {
          if (failing.has(message.id)) throw new Error('not yet');
        });
        const relay = relayWith({ publisher, ordered: true, maxAttempts: 2 });
        const publishedIds = () => publisher.published.map((message) => message.id);

        expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 2, retried: 1 });
        expect(publishedIds()).toEqual([m1, free]);
        clock.advance(BACKOFF.maxDelayMs);
        expect(await relay.runOnce()).toMatchObject({ claimed: 2, published: 1, deadLettered: 1 });
        expect(publishedIds()).toEqual([m1, free, m2]);
        clock.advance(BACKOFF.maxDelayMs);
        // K1 is dead: K2 must wait for it.
        expect(await relay.runOnce()).toMatchObject({ claimed: 0 });

        failing.clear();
        await relay.redrive([k1]);
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1 });
        expect(await relay.runOnce()).toMatchObject({ claimed: 1, published: 1 });
        expect(publishedIds()).toEqual([m1, free, m2, k1, k2]);
        expect(await outboxRows(db)).toEqual([]);
      });

      it('reports the backlog and the age of the oldest unsent event', async () => {
        const { clock, relayWith, enqueueNumbered } = await fresh();
        const relay = relayWith({ publisher: recordingPublisher() });
        expect(await relay.stats()).toMatchObject({ backlog: 0, oldestUnsentAgeMs: null, dead: 0 });
        await enqueueNumbered(4);
        const first = await relay.stats();
        expect(first.backlog).toBe(4);
        expect(first.oldestUnsentAgeMs).toBeGreaterThan(0);
        clock.advance(5_000);
        const later = await relay.stats();
        expect((later.oldestUnsentAgeMs ?? 0) - (first.oldestUnsentAgeMs ?? 0)).toBeCloseTo(
          5_000,
          -1,
        );
      });

      it('with retainSentMs, keeps published events marked sent instead of deleting them', async () => {
        const { db, relayWith, enqueueNumbered } = await fresh();
        const ids = await enqueueNumbered(3);
        const relay = relayWith({ publisher: recordingPublisher(), retainSentMs: 60_000 });
        expect(await relay.runOnce()).toMatchObject({ claimed: 3, published: 3 });
        expect((await outboxRows(db)).map((row) => [row.id, row.sent, row.locked])).toEqual(
          ids.map((id) => [id, true, false]),
        );
        expect(await relay.stats()).toMatchObject({ backlog: 0, published: 3 });
        expect(await relay.runOnce()).toMatchObject({ claimed: 0 });
      });

      it('cleans up sent events after retainSentMs, never unsent or dead ones', async () => {
        const { db, clock, relayWith, enqueueNumbered } = await fresh();
        const ids = await enqueueNumbered(4);
        const relay = relayWith({
          publisher: recordingPublisher((message) => {
            if (message.id === ids[3]) throw new Error('poison');
          }),
          maxAttempts: 1,
          retainSentMs: 60_000,
        });
        await relay.runOnce();
        await enqueueNumbered(1);
        expect(await relay.cleanup()).toBe(0);
        clock.advance(60_001);
        expect(await relay.cleanup()).toBe(3);
        expect((await outboxRows(db)).map((row) => [row.sent, row.dead])).toEqual([
          [false, true],
          [false, false],
        ]);
      });
    });

    describe('running', () => {
      it('wakes up on NOTIFY, without which it would sleep until its next poll', async () => {
        const { db } = await emptyOutbox();
        const publisher = recordingPublisher();
        // A manual clock's timers never fire here: once the relay sleeps, only a
        // notification can wake it.
        const clock = manualClock(Date.now() + 60_000);
        const relay = createRelay({ db, publisher, clock, pollIntervalMs: 1_000 });
        await relay.start();
        try {
          await waitFor(() => clock.pendingTimers() === 1, { what: 'the relay to sleep' });
          await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
          await waitFor(() => publisher.published.length === 1, {
            what: 'a publish woken by NOTIFY',
          });
        } finally {
          await relay.stop();
        }
        expect(clock.pendingTimers()).toBe(0);
      });

      it('drains an ordered backlog wider than a batch without sleeping after an overlapped partial claim', async () => {
        const { db } = await emptyOutbox();
        // 15 aggregates of 3 events, each aggregate's events in order: 15 heads, then 15
        // second events, then 15 third ones.
        const ids = await events.enqueue(
          db,
          Array.from({ length: 45 }, (_, index) => ({
            topic: 'test.numbered' as const,
            payload: { n: Math.floor(index / 15) },
            aggregateKey: `aggregate-${index % 15}`,
          })),
        );
        const gate = deferred();
        const publisher = recordingPublisher(async (message) => {
          if (message.id === ids[0]) await gate.promise;
        });
        // A manual clock never advanced: a relay that sleeps a poll interval never wakes.
        const clock = manualClock(Date.now() + 60_000);
        const relay = createRelay({
          db,
          publisher,
          clock,
          ordered: true,
          batchSize: 10,
          pollIntervalMs: 60_000,
          listen: false,
        });
        await relay.start();
        try {
          // The first round (10 heads) hangs on one event; the second claim finds only the 5
          // other heads, the rest sit behind the first round's leased events: a partial
          // claim of a backlog that is not drained.
          // Bounds that only catch a stall, sized for a loaded machine.
          await waitFor(() => publisher.published.length === 14, {
            what: 'the second round',
            timeoutMs: 20_000,
          });
          gate.resolve();
          await waitFor(() => publisher.published.length === 45, {
            what: 'every event',
            timeoutMs: 20_000,
          });
        } finally {
          gate.resolve();
          await relay.stop();
        }
        const order = new Map<string, number[]>();
        for (const { aggregateKey, payload } of publisher.published) {
          if (aggregateKey === null) throw new Error('every event here has an aggregate key');
          const seen = order.get(aggregateKey) ?? [];
          seen.push((payload as { n: number }).n);
          order.set(aggregateKey, seen);
        }
        expect(order.size).toBe(15);
        for (const seen of order.values()) expect(seen).toEqual([0, 1, 2]);
      });

      /** An empty outbox with five numbered events in it. */
      const fiveNumbered = async () => {
        const { db } = await emptyOutbox();
        const ids = await events.enqueue(
          db,
          Array.from({ length: 5 }, (_, n) => ({
            topic: 'test.numbered' as const,
            payload: { n },
          })),
        );
        return { db, ids };
      };

      /**
       * Five events and a started relay that claims them two at a time, whose publish of the
       * first event hangs until `gate` opens: round 1 (ids 0-1) stays in flight while round 2
       * (2-3) is claimed and published beside it.
       */
      const twoRoundsOfTwo = async () => {
        const { db, ids } = await fiveNumbered();
        const gate = deferred();
        const publisher = recordingPublisher(async (message) => {
          if (message.id === ids[0]) await gate.promise;
        });
        const relay = createRelay({ db, publisher, batchSize: 2, listen: false });
        await relay.start();
        return { db, ids, gate, publisher, relay };
      };

      it('claims the next batch while a full one publishes, at most one round ahead', async () => {
        const { db, ids, gate, publisher, relay } = await twoRoundsOfTwo();
        try {
          // The first batch (ids 0-1) hangs in its publish; the second (2-3) goes out anyway.
          await waitFor(() => publisher.published.length === 3, { what: 'the second batch' });
          expect(publisher.published.map((message) => message.id)).toEqual([
            ids[1],
            ids[2],
            ids[3],
          ]);
          // Not a third round while the first is still publishing: the last event waits.
          const waiting = (await outboxRows(db)).find((row) => row.id === ids[4]);
          expect(waiting).toMatchObject({ locked: false });
          gate.resolve();
          await waitFor(() => publisher.published.length === 5, { what: 'every event' });
        } finally {
          gate.resolve();
          await relay.stop();
        }
        expect(await outboxRows(db)).toEqual([]);
        expect((await relay.stats()).published).toBe(5);
      });

      it('stopped while two rounds publish, settles both and claims no third', async () => {
        const { db, ids, gate, publisher, relay } = await twoRoundsOfTwo();
        let stopped = false;
        let stopping: Promise<void> | undefined;
        try {
          // Round 1 (ids 0-1) hangs in its publish while round 2 (2-3) has published.
          await waitFor(() => publisher.published.length === 3, { what: 'the second round' });
          stopping = relay.stop().then(() => {
            stopped = true;
          });
          await new Promise((resolve) => setImmediate(resolve));
          expect(stopped).toBe(false);
        } finally {
          gate.resolve();
          await (stopping ?? relay.stop());
        }
        expect(relay.running).toBe(false);
        expect(publisher.published.map((message) => message.id).sort()).toEqual(
          ids.slice(0, 4).sort(),
        );
        // Both rounds settled (their events deleted); the fifth was never claimed.
        expect(await outboxRows(db)).toEqual([
          expect.objectContaining({ id: ids[4], locked: false, attempts: 0 }),
        ]);
        expect((await relay.stats()).published).toBe(4);
      });

      it('pauses for an outage that begins while a round publishes ahead, burns no attempt, and resumes', async () => {
        const { db, ids } = await fiveNumbered();
        let down = true;
        let tries = 0;
        const publisher = {
          ...recordingPublisher(() => {
            tries++;
            if (down) throw Object.assign(new Error('connection refused'), { transient: true });
          }),
          isTransientError: (error: unknown) =>
            (error as { transient?: boolean }).transient === true,
        };
        const reported: RelayEvent[] = [];
        const relay = createRelay({
          db,
          publisher,
          batchSize: 2,
          listen: false,
          pollIntervalMs: 10,
          backoff: { baseDelayMs: 5, maxDelayMs: 20 },
          maxAttempts: 2,
          onEvent: (event) => reported.push(event),
        });
        await relay.start();
        try {
          await waitFor(
            () => reported.filter((event) => event.type === 'publisher_unavailable').length >= 3,
            { what: 'three outage pauses' },
          );
          // Full batches of 2 overlap, so a pause may follow two rounds' tries, never more.
          const pauses = reported.filter((event) => event.type === 'publisher_unavailable');
          expect(tries).toBeLessThanOrEqual(2 * 2 * (pauses.length + 1));
          const rows = await outboxRows(db);
          expect(rows).toHaveLength(5);
          expect(rows.every((row) => row.attempts === 0 && !row.dead)).toBe(true);
          down = false;
          await waitFor(() => publisher.published.length === 5, { what: 'every event' });
        } finally {
          await relay.stop();
        }
        expect(publisher.published.map((message) => message.id).sort()).toEqual([...ids].sort());
        expect(await outboxRows(db)).toEqual([]);
      });

      it('runs the embedded pipeline: enqueue in a transaction, relay in process, consume once', async () => {
        const { db } = await emptyOutbox();
        const billing = idempotentConsumer({ db, name: 'billing' });
        const relay = createRelay({
          db,
          pollIntervalMs: 50,
          publisher: inProcessPublisher(
            {
              'order.placed': (event) =>
                billing.handle(event, async (tx) => {
                  await tx.execute(
                    sql`insert into outbox_test_effects (event_id, note) values (${event.id}, ${event.payload.orderId})`,
                  );
                }),
            },
            { events },
          ),
        });
        await relay.start();
        try {
          const ids = await Promise.all(
            ['o-1', 'o-2', 'o-3'].map((orderId) =>
              db.transaction((tx) =>
                events.enqueue(tx, {
                  topic: 'order.placed',
                  aggregateKey: orderId,
                  payload: { orderId, totalCents: 100 },
                }),
              ),
            ),
          );
          await waitFor(async () => (await effectCounts(db)).size === 3, {
            what: 'the three orders to be consumed',
          });
          expect(await effectCounts(db)).toEqual(new Map(ids.map((id) => [id, 1])));
          await waitFor(async () => (await relay.stats()).backlog === 0, { what: 'the marks' });
        } finally {
          await relay.stop();
        }
      });

      it('with minPollIntervalMs, looks again soon after finding events and backs off while it finds none', async () => {
        const { db } = await emptyOutbox();
        const publisher = recordingPublisher();
        // A manual clock: the relay's waits are recorded, and end only when advanced.
        const base = manualClock(Date.now() + 60_000);
        const waits: number[] = [];
        const clock: typeof base = {
          ...base,
          setTimeout: (callback, delayMs) => {
            waits.push(delayMs);
            return base.setTimeout(callback, delayMs);
          },
        };
        const relay = createRelay({
          db,
          publisher,
          clock,
          listen: false,
          batchSize: 10,
          pollIntervalMs: 1_000,
          minPollIntervalMs: 10,
        });
        const slept = (count: number) =>
          waitFor(() => waits.length === count && base.pendingTimers() === 1, {
            what: `the relay's wait number ${count}`,
          });
        await relay.start();
        try {
          await slept(1); // found nothing: the full interval
          await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
          base.advance(1_000);
          await slept(2); // found one event: the shortest wait
          expect(publisher.published).toHaveLength(1);
          for (let count = 3, wait = 10; count <= 9; count++) {
            base.advance(wait);
            await slept(count);
            wait = waits[count - 1] as number;
          }
          await events.enqueue(db, { topic: 'test.numbered', payload: { n: 2 } });
          base.advance(1_000);
          await slept(10);
        } finally {
          await relay.stop();
        }
        expect(waits).toEqual([1_000, 10, 20, 40, 80, 160, 320, 640, 1_000, 10]);
        expect(publisher.published).toHaveLength(2);
      });

      it('polls when it cannot listen, and stops only after settling the batch in flight', async () => {
        const { db } = await emptyOutbox();
        const gate = deferred();
        const entered = deferred();
        const publisher = recordingPublisher(async () => {
          entered.resolve();
          await gate.promise;
        });
        const relay = createRelay({ db, publisher, pollIntervalMs: 20, listen: false });
        await relay.start();
        expect(relay.running).toBe(true);
        await events.enqueue(db, { topic: 'test.numbered', payload: { n: 1 } });
        await entered.promise;
        let stopped = false;
        const stopping = relay.stop().then(() => {
          stopped = true;
        });
        await Promise.resolve();
        expect(stopped).toBe(false);
        gate.resolve();
        await stopping;
        expect(relay.running).toBe(false);
        expect(await outboxRows(db)).toEqual([]);
      });
    });
  });
}

describe('createRelay options', () => {
  it('refuses impossible settings', () => {
    const base = { db: {} as RelayOptions['db'], publisher: recordingPublisher() };
    for (const bad of [
      { batchSize: 0 },
      { batchSize: 1.5 },
      { leaseMs: 0 },
      { maxAttempts: 0 },
      { pollIntervalMs: Number.NaN },
      { minPollIntervalMs: 0 },
      { pollIntervalMs: 100, minPollIntervalMs: 200 },
      { backoff: { baseDelayMs: -1 } },
    ]) {
      let caught: unknown;
      try {
        createRelay({ ...base, ...bad });
      } catch (error) {
        caught = error;
      }
      expect(isConfigurationError(caught), JSON.stringify(bad)).toBe(true);
    }
  });
});
