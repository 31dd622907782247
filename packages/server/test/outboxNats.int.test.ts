import { isConfigurationError } from '@idem/core';
import { manualClock } from '@idem/core/testing';
import { DiscardPolicy, JetStreamApiError, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/nats-core';
import { connect } from '@nats-io/transport-node';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import type {
  JetStreamConsumerEvent,
  JetStreamConsumption,
} from '../src/nats/ConsumeJetStreamOptions.js';
import { consumeJetStream } from '../src/nats/consumeJetStream.js';
import { isTransientNatsError } from '../src/nats/isTransientNatsError.js';
import { type JetStreamPublisher, jetStreamPublisher } from '../src/nats/jetStreamPublisher.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import type { OutboxMessage } from '../src/outbox/OutboxMessage.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { Relay } from '../src/outbox/relay/Relay.js';
import type { RelayEvent } from '../src/outbox/relay/RelayEvent.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { deferred } from './fixtures/deferred.js';
import { useDatabase } from './harness.js';
import { effectCounts, events, outboxRows, resetOutbox, waitFor } from './outbox/fixtures.js';
import { NATS_HOST, NATS_PORT, useJetStream } from './outbox/jetStreamFixture.js';
import { type TcpProxy, tcpProxy } from './outbox/tcpProxy.js';

const recordEffect = (eventId: string) => async (tx: PgDatabaseLike) => {
  await tx.execute(sql`insert into outbox_test_effects (event_id) values (${eventId})`);
};

/** What starting a consumption rejected with; one that started is stopped (`undefined`). */
const refusalOf = (starting: Promise<JetStreamConsumption>): Promise<unknown> =>
  starting.then(
    (consumption) => consumption.stop().then(() => undefined),
    (error: unknown) => error,
  );

describe('NATS JetStream on Postgres', () => {
  const database = useDatabase('Postgres');
  const nats = useJetStream();
  const cleanups: (() => Promise<unknown>)[] = [];
  const later = <T extends { stop?: () => Promise<unknown>; close?: () => Promise<unknown> }>(
    resource: T,
  ): T => {
    cleanups.push(async () => {
      await resource.stop?.();
      await resource.close?.();
    });
    return resource;
  };
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** An empty outbox on the test database and a new stream, for one test. */
  const freshStream = async () => {
    const { db } = database();
    await resetOutbox(db);
    return { db, stream: await nats().createStream() };
  };
  type Fresh = Awaited<ReturnType<typeof freshStream>>;

  /** What a batch consumer of `durable` into the `billing` inbox needs, 25 events a batch. */
  const billingBatches = async ({ db, stream }: Fresh, durable: string) => ({
    consumer: await nats().js.consumers.get(stream.name, durable),
    inbox: idempotentConsumer({ db, name: 'billing' }),
    events,
    maxBatch: 25,
  });

  /** A relay that publishes the outbox to `stream` (stopped after the test). */
  const relayTo = ({ db, stream }: Fresh) =>
    createRelay({
      db,
      publisher: later(jetStreamPublisher({ connection: nats().nc, subject: stream.subjectOf })),
    });

  /** Waits until the consumer `durable` of `stream` has nothing pending or unacknowledged. */
  const untilAllAcknowledged = (stream: string, durable: string) =>
    waitFor(
      async () => {
        const info = await nats().jsm.consumers.info(stream, durable);
        return info.num_ack_pending === 0 && info.num_pending === 0;
      },
      { what: 'every message to be acknowledged' },
    );

  /** Every message in the stream, by event id (an ordered consumer reads them all). */
  const streamContents = async (stream: string, expected: number) => {
    const consumer = await nats().js.consumers.get(stream);
    const seen = new Map<string, JsMsg>();
    const messages = await consumer.fetch({ max_messages: expected, expires: 2_000 });
    for await (const message of messages) {
      seen.set(message.headers?.get('Nats-Msg-Id') ?? '', message);
      if (seen.size === expected) break;
    }
    return seen;
  };

  it('relays events to JetStream with the event id as message id; the consumer handles each once', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const ids = await db.transaction((tx) =>
      events.enqueue(tx, [
        {
          topic: 'order.placed',
          aggregateKey: 'order-1',
          payload: { orderId: 'order-1', totalCents: 1299 },
          headers: { 'trace-id': 't-1' },
        },
        { topic: 'order.shipped', payload: { orderId: 'order-1', carrier: 'dhl' } },
      ]),
    );
    const publisher = later(
      jetStreamPublisher({ connection: nats().nc, subject: stream.subjectOf }),
    );
    const relay = createRelay({ db, publisher });
    expect(await relay.runOnce()).toMatchObject({ claimed: 2, published: 2 });

    const inbox = idempotentConsumer({ db, name: 'billing' });
    const handled: { topic: string; payload: unknown; aggregateKey: string | null }[] = [];
    const reported: JetStreamConsumerEvent[] = [];
    later(
      await consumeJetStream({
        consumer: await nats().js.consumers.get(stream.name, await stream.addConsumer()),
        inbox,
        events,
        handler: async (event, tx) => {
          handled.push({
            topic: event.topic,
            payload: event.payload,
            aggregateKey: event.aggregateKey,
          });
          if (event.topic === 'order.placed') {
            expect(event.headers).toEqual({ 'trace-id': 't-1' });
          }
          await recordEffect(event.id)(tx);
        },
        onEvent: (event) => reported.push(event),
      }),
    );
    await waitFor(() => reported.length === 2, { what: 'both events to be consumed' });
    expect(reported.map((event) => event.type)).toEqual(['processed', 'processed']);
    expect(handled).toEqual([
      {
        topic: 'order.placed',
        payload: { orderId: 'order-1', totalCents: 1299 },
        aggregateKey: 'order-1',
      },
      {
        topic: 'order.shipped',
        payload: { orderId: 'order-1', carrier: 'dhl' },
        aggregateKey: null,
      },
    ]);
    expect(await effectCounts(db)).toEqual(new Map(ids.map((id) => [id, 1])));
    expect([...(await streamContents(stream.name, 2)).keys()]).toEqual(ids);
  });

  it('survives a relay crash between publish and mark: republished, stored once, handled once', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const [id] = await events.enqueue(db, [
      { topic: 'order.placed', payload: { orderId: 'o-9', totalCents: 5 } },
    ]);
    const real = later(jetStreamPublisher({ connection: nats().nc, subject: stream.subjectOf }));
    const clock = manualClock(Date.now() + 60_000);
    const crashedAfterPublish = deferred();
    const neverMarks = deferred();
    const crashing = createRelay({
      db,
      clock,
      leaseMs: 5_000,
      publisher: {
        async publish(message) {
          await real.publish(message);
          crashedAfterPublish.resolve();
          await neverMarks.promise;
        },
      },
    });
    const crashed = crashing.runOnce();
    await crashedAfterPublish.promise;

    const acks: boolean[] = [];
    const survivor = createRelay({
      db,
      clock: manualClock(clock.now() + 5_001),
      publisher: {
        async publish(message: OutboxMessage) {
          // What JetStream answers for the republished copy.
          const ack = await nats().js.publish(
            stream.subjectOf(message),
            JSON.stringify(message.payload),
            {
              msgID: message.id,
            },
          );
          acks.push(ack.duplicate);
        },
      },
    });
    expect(await survivor.runOnce()).toMatchObject({ claimed: 1, published: 1 });
    expect(acks).toEqual([true]);
    neverMarks.resolve();
    expect(await crashed).toMatchObject({ leaseLost: 1 });

    const reported: JetStreamConsumerEvent[] = [];
    later(
      await consumeJetStream({
        consumer: await nats().js.consumers.get(stream.name, await stream.addConsumer()),
        inbox: idempotentConsumer({ db, name: 'billing' }),
        handler: (event, tx) => recordEffect(event.id)(tx),
        onEvent: (event) => reported.push(event),
      }),
    );
    await waitFor(() => reported.length === 1, { what: 'the event to be consumed' });
    expect(await effectCounts(db)).toEqual(new Map([[id, 1]]));
    expect((await nats().jsm.streams.info(stream.name)).state.messages).toBe(1);
  });

  it('publishBatch: one result per message, in order, from one reply subscription', async () => {
    const { jsm, nc } = nats();
    const suffix = crypto.randomUUID().replaceAll('-', '').slice(0, 12);
    const stream = `IDEM_TEST_BATCH_${suffix}`;
    // Room for two messages, and new ones refused beyond that: a refusal by JetStream.
    await jsm.streams.add({
      name: stream,
      subjects: [`idembatch.${suffix}`],
      max_msgs: 2,
      discard: DiscardPolicy.New,
      duplicate_window: nanos(60_000),
    });
    later({ close: () => jsm.streams.delete(stream) });
    const message = (id: string, subject: string): OutboxMessage => ({
      id,
      topic: subject,
      aggregateKey: null,
      payload: { id },
      headers: {},
      createdAt: new Date(),
    });
    const [first, second, third] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
    const publisher = later(
      jetStreamPublisher({
        connection: nc,
        subject: (event) => {
          if (event.topic === 'unnamed') throw new Error('no subject for this one');
          return event.topic === 'stream' ? `idembatch.${suffix}` : `idembatch.nostream.${suffix}`;
        },
      }),
    );
    const results = await publisher.publishBatch?.([
      message(first, 'stream'),
      message(first, 'stream'), // the same id again: JetStream drops it and acknowledges
      message(second, 'stream'),
      message(third, 'stream'), // the stream is full
      message(crypto.randomUUID(), 'elsewhere'), // no stream captures the subject
      message(crypto.randomUUID(), 'unnamed'),
    ]);
    expect(results?.map((result) => result.ok)).toEqual([true, true, true, false, false, false]);
    const errors = (results ?? []).map((result) => (result.ok ? undefined : result.error));
    expect(errors[3]).toBeInstanceOf(JetStreamApiError);
    expect(isTransientNatsError(errors[3])).toBe(false); // counts as an attempt
    expect(isTransientNatsError(errors[4])).toBe(true); // no responders: an outage
    expect(String(errors[5])).toContain('no subject for this one');
    expect((await jsm.streams.info(stream)).state.messages).toBe(2);
  });

  it('naks a failed handler with a delay, acks after commit, and skips a redelivered duplicate', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const durable = await stream.addConsumer();
    const ids = await events.enqueue(db, [
      { topic: 'test.numbered', payload: { n: 1 } },
      { topic: 'test.numbered', payload: { n: 2 } },
    ]);
    const relay = relayTo(fresh);
    await relay.runOnce();
    const inbox = idempotentConsumer({ db, name: 'billing' });

    // A consumer that commits the second event and dies before its ack reaches NATS.
    const consumer = await nats().js.consumers.get(stream.name, durable);
    const first = await consumer.next({ expires: 2_000 });
    const second = await consumer.next({ expires: 2_000 });
    expect(second?.headers?.get('Nats-Msg-Id')).toBe(ids[1]);
    await inbox.handle({ id: ids[1] as string }, recordEffect(ids[1] as string));
    first?.nak();
    second?.nak();

    let failOnce = true;
    const reported: JetStreamConsumerEvent[] = [];
    later(
      await consumeJetStream({
        consumer,
        inbox,
        nakBackoff: { baseDelayMs: 50, maxDelayMs: 100 },
        handler: async (event, tx) => {
          await recordEffect(event.id)(tx);
          if (failOnce) {
            failOnce = false;
            throw new Error('flaky downstream');
          }
        },
        onEvent: (event) => reported.push(event),
      }),
    );
    await waitFor(() => reported.filter((event) => event.type !== 'failed').length === 2, {
      what: 'both events to be settled',
    });
    const byEvent = (eventId: string | undefined) =>
      reported.filter((event) => event.eventId === eventId).map((event) => event.type);
    expect(byEvent(ids[0])).toEqual(['failed', 'processed']);
    expect(byEvent(ids[1])).toEqual(['duplicate']);
    const failed = reported.find((event) => event.type === 'failed');
    expect(failed?.retryInMs).toBeLessThanOrEqual(100);
    expect(await effectCounts(db)).toEqual(new Map(ids.map((id) => [id, 1])));
    await untilAllAcknowledged(stream.name, durable);
  });

  it('batchHandler: one transaction per batch, acks after commit, naks only the poison event', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const ids = await events.enqueue(
      db,
      Array.from({ length: 60 }, (_, n) => ({
        topic: 'test.numbered' as const,
        payload: { n, ...(n === 17 ? { poison: true } : {}) },
      })),
    );
    const poison = ids[17] as string;
    const relay = relayTo(fresh);
    expect(await relay.runOnce()).toMatchObject({ claimed: 60, published: 60 });

    const durable = await stream.addConsumer();
    let cured = false;
    const batchSizes: number[] = [];
    const reported: JetStreamConsumerEvent[] = [];
    later(
      await consumeJetStream({
        ...(await billingBatches(fresh, durable)),
        concurrency: 2,
        nakBackoff: { baseDelayMs: 50, maxDelayMs: 100 },
        batchHandler: async (batch, tx) => {
          batchSizes.push(batch.length);
          for (const event of batch) await recordEffect(event.id)(tx);
          if (!cured && batch.some((event) => 'poison' in event.payload && event.payload.poison)) {
            // Cured by its first failure alone (the one the consumer reports), when it fails
            // rather than when the report arrives: a copy redelivered meanwhile, in the other
            // batch in flight, then fails no second time.
            if (batch.length === 1) cured = true;
            throw new Error('poison');
          }
        },
        onEvent: (event) => {
          reported.push(event);
        },
      }),
    );
    await waitFor(async () => (await effectCounts(db)).size === 60, {
      timeoutMs: 15_000,
      what: 'every event, the poison included once cured, to be consumed',
    });
    expect(await effectCounts(db)).toEqual(new Map(ids.map((id) => [id, 1])));
    expect(Math.max(...batchSizes)).toBeGreaterThan(1);
    expect(Math.max(...batchSizes)).toBeLessThanOrEqual(25);
    const failed = reported.filter((event) => event.type === 'failed');
    expect(failed.map((event) => event.eventId)).toEqual([poison]);
    expect(reported.filter((event) => event.type === 'processed')).toHaveLength(60);
    const cure = reported.find((event) => event.type === 'processed' && event.eventId === poison);
    expect(cure?.deliveryCount).toBeGreaterThanOrEqual(2);
    await untilAllAcknowledged(stream.name, durable);
  });

  it('batchHandler: messages that arrive while a partial batch is handled wait for it and go together', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const relay = relayTo(fresh);
    const numbered = (from: number, count: number) =>
      Array.from({ length: count }, (_, n) => ({
        topic: 'test.numbered' as const,
        payload: { n: from + n },
      }));
    const durable = await stream.addConsumer();
    const gate = deferred();
    const first = deferred();
    const batchSizes: number[] = [];
    later(
      await consumeJetStream({
        ...(await billingBatches(fresh, durable)),
        concurrency: 4,
        batchHandler: async (batch, tx) => {
          batchSizes.push(batch.length);
          for (const event of batch) await recordEffect(event.id)(tx);
          if (batchSizes.length === 1) {
            first.resolve();
            await gate.promise;
          }
        },
      }),
    );
    // A lone message starts at once, and hangs in the handler.
    await events.enqueue(db, numbered(0, 1));
    expect(await relay.runOnce()).toMatchObject({ published: 1 });
    await first.promise;
    // Ten more arrive while it is in flight: three workers are idle, none may start on them.
    await events.enqueue(db, numbered(1, 10));
    expect(await relay.runOnce()).toMatchObject({ published: 10 });
    await waitFor(
      async () => (await nats().jsm.consumers.info(stream.name, durable)).num_ack_pending === 11,
      { what: 'the ten messages to be delivered to the consumer' },
    );
    // The consumer reads on this connection: after a round trip on it the ten have been
    // read, and after one turn of the event loop they are queued.
    await nats().nc.flush();
    await new Promise((resolve) => setImmediate(resolve));
    expect(batchSizes).toEqual([1]);
    gate.resolve();
    await waitFor(async () => (await effectCounts(db)).size === 11, {
      what: 'the eleven events to be consumed',
    });
    expect(batchSizes).toEqual([1, 10]);
  });

  it('refuses both or neither of handler and batchHandler, and a zero maxBatch', async () => {
    const { db } = database();
    const stream = await nats().createStream();
    const consumer = await nats().js.consumers.get(stream.name, await stream.addConsumer());
    const inbox = idempotentConsumer({ db, name: 'billing' });
    const refused = (options: Partial<Parameters<typeof consumeJetStream>[0]>) =>
      refusalOf(consumeJetStream({ consumer, inbox, ...options }));
    const neither = await refused({});
    expect(isConfigurationError(neither)).toBe(true);
    expect((neither as Error).message).toMatch(/exactly one of `handler`/);
    expect(
      isConfigurationError(
        await refused({ handler: async () => {}, batchHandler: async () => {} }),
      ),
    ).toBe(true);
    expect(String(await refused({ batchHandler: async () => {}, maxBatch: 0 }))).toMatch(
      /maxBatch must be a positive integer; got 0/,
    );
  });

  it('refuses a max_ack_pending below maxBatch × concurrency, which would cap the batches in flight', async () => {
    const { db } = database();
    const stream = await nats().createStream();
    const inbox = idempotentConsumer({ db, name: 'billing' });
    // JetStream's default max_ack_pending is 1,000.
    const byDefault = await nats().js.consumers.get(stream.name, await stream.addConsumer());
    const batches = { inbox, batchHandler: async () => {}, maxBatch: 500, concurrency: 4 };
    const error = await refusalOf(consumeJetStream({ consumer: byDefault, ...batches }));
    expect(isConfigurationError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /max_ack_pending \(1000\) is below maxBatch × concurrency \(500 × 4\)/,
    );
    // Room for every batch in flight: accepted.
    const roomy = await nats().js.consumers.get(
      stream.name,
      await stream.addConsumer({ max_ack_pending: 2_000 }),
    );
    const consumption = await consumeJetStream({ consumer: roomy, ...batches });
    await consumption.stop();
  });

  it('refuses redelivery delays longer than the inbox was sized for, naming both', async () => {
    const { db } = database();
    const stream = await nats().createStream();
    const inbox = idempotentConsumer({
      db,
      name: 'billing',
      retentionMs: 60_000,
      maxRedeliveryDelayMs: 10_000,
    });
    /** The refusal of a consumer with `ackWaitMs` whose naks wait up to `maxDelayMs`. */
    const refusal = async (ackWaitMs: number, maxDelayMs: number) => {
      const consumer = await nats().js.consumers.get(
        stream.name,
        await stream.addConsumer({ ack_wait: nanos(ackWaitMs) }),
      );
      const error = await refusalOf(
        consumeJetStream({ consumer, inbox, handler: async () => {}, nakBackoff: { maxDelayMs } }),
      );
      expect(isConfigurationError(error)).toBe(true);
      return (error as Error).message;
    };
    expect(await refusal(5_000, 20_000)).toMatch(
      /nakBackoff\.maxDelayMs \(20000 ms\).*maxRedeliveryDelayMs \(10000 ms\)/,
    );
    expect(await refusal(30_000, 5_000)).toMatch(
      /30000 ms \(ack_wait.*maxRedeliveryDelayMs \(10000 ms\)/,
    );
  });

  it('backs off while NATS is down at start and again mid-run, recovers, and loses nothing', async () => {
    const fresh = await freshStream();
    const { db, stream } = fresh;
    const proxy: TcpProxy = await tcpProxy(NATS_HOST, NATS_PORT);
    cleanups.push(() => proxy.stop());
    const log: RelayEvent[] = [];
    const outages = () => log.filter((event) => event.type === 'publisher_unavailable').length;
    const real: JetStreamPublisher = jetStreamPublisher({
      connection: () =>
        connect({
          servers: `127.0.0.1:${proxy.port}`,
          reconnectTimeWait: 50,
          maxReconnectAttempts: -1,
          timeout: 1_000,
        }),
      subject: stream.subjectOf,
      timeoutMs: 500,
    });
    later(real);
    let successes = 0;
    let cutAfter = Number.POSITIVE_INFINITY;
    const relay: Relay = later(
      createRelay({
        db,
        publisher: {
          isTransientError: (error: unknown) => real.isTransientError?.(error) === true,
          async publish(message) {
            await real.publish(message);
            if (++successes === cutAfter) await proxy.stop();
          },
        },
        batchSize: 10,
        pollIntervalMs: 20,
        maxAttempts: 2,
        backoff: { baseDelayMs: 20, maxDelayMs: 200 },
        onEvent: (event) => log.push(event),
      }),
    );
    const enqueue50 = (from: number) =>
      db.transaction((tx) =>
        events.enqueue(
          tx,
          Array.from({ length: 50 }, (_, n) => ({
            topic: 'test.numbered' as const,
            payload: { n: from + n },
          })),
        ),
      );

    const ids = await enqueue50(0);
    await relay.start();
    await waitFor(() => outages() >= 3, { what: 'the relay to back off from a down NATS' });
    const whileDown = await outboxRows(db);
    expect(whileDown.every((row) => !row.sent && !row.dead && row.attempts === 0)).toBe(true);
    const lastError = log.findLast((event) => event.type === 'publisher_unavailable');
    expect(
      isTransientNatsError(lastError?.type === 'publisher_unavailable' && lastError.error),
    ).toBe(true);

    await proxy.start();
    await waitFor(async () => (await relay.stats()).backlog === 0, {
      timeoutMs: 10_000,
      what: 'the backlog to drain after NATS came up',
    });

    cutAfter = successes + 20;
    const outagesBefore = outages();
    ids.push(...(await enqueue50(50)));
    await waitFor(() => outages() > outagesBefore + 1, {
      timeoutMs: 10_000,
      what: 'the relay to back off from NATS going down mid-run',
    });
    expect((await relay.stats()).backlog).toBeGreaterThan(0);
    await proxy.start();
    await waitFor(async () => (await relay.stats()).backlog === 0, {
      timeoutMs: 60_000,
      what: 'the backlog to drain after NATS came back',
    });

    expect(await relay.stats()).toMatchObject({ dead: 0, deadLettered: 0 });
    expect((await nats().jsm.streams.info(stream.name)).state.messages).toBe(100);
    expect(new Set((await streamContents(stream.name, 100)).keys())).toEqual(new Set(ids));
  });
});

describe('isTransientNatsError', () => {
  it('tells outages from errors about the message', async () => {
    const refused = await connect({ servers: '127.0.0.1:1', timeout: 500 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isTransientNatsError(refused)).toBe(true);
    expect(isTransientNatsError(Object.assign(new Error('x'), { name: 'TimeoutError' }))).toBe(
      true,
    );
    expect(isTransientNatsError(new Error('wrapped', { cause: { code: 'ECONNRESET' } }))).toBe(
      true,
    );
    expect(isTransientNatsError(new Error('maximum payload exceeded'))).toBe(false);
    expect(isTransientNatsError(undefined)).toBe(false);
  });
});
