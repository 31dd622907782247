import { manualClock } from '@idem/core/testing';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { outboxTelemetry } from '../src/otel/index.js';
import { defineEvents } from '../src/outbox/defineEvents.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import type { OutboxMessage, Publisher } from '../src/outbox/OutboxMessage.js';
import { inProcessPublisher } from '../src/outbox/publishers/inProcessPublisher.js';
import { createRelay } from '../src/outbox/relay/createRelay.js';
import type { RelayOptions } from '../src/outbox/relay/RelayOptions.js';
import { backends, rows, useDatabase } from './harness.js';
import { type OtelHarness, otelHarness } from './otelHarness.js';

const schemas = {
  'order.placed': z.object({ orderId: z.string() }),
  'order.shipped': z.object({ orderId: z.string() }),
};
const PLACED = { 'messaging.destination.name': 'order.placed' };
const SHIPPED = { 'messaging.destination.name': 'order.shipped' };

/**
 * The relay's and the consumer's clock runs this far ahead of the database's, which stamps
 * `created_at`: every lag they measure is this, less the time the test took to get there.
 */
const AHEAD_MS = 60_000;

for (const backend of backends) {
  describe(`outboxTelemetry on ${backend}`, () => {
    const database = useDatabase(backend);
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    const setUp = async () => {
      const { db } = database();
      await db.execute(sql`truncate idem_outbox, idem_inbox`);
      const otel = otelHarness();
      cleanups.push(otel.shutdown);
      const telemetry = outboxTelemetry({
        meterProvider: otel.meterProvider,
        tracerProvider: otel.tracerProvider,
      });
      const events = defineEvents(schemas, { onEvent: telemetry.onEvent });
      const clock = manualClock(Date.now() + AHEAD_MS);
      const placeOrders = (...orderIds: string[]) =>
        db.transaction((tx) =>
          events.enqueue(
            tx,
            orderIds.map((orderId) => ({ topic: 'order.placed' as const, payload: { orderId } })),
          ),
        );
      const relayWith = (publisher: Publisher, options: Partial<RelayOptions> = {}) =>
        createRelay({
          db,
          publisher,
          clock,
          listen: false,
          backoff: { baseDelayMs: 1_000, maxDelayMs: 1_000, random: () => 0.5 },
          onEvent: telemetry.onEvent,
          ...options,
        });
      /** A relay whose every publish the warehouse refuses, dead-lettering at `maxAttempts`. */
      const refusedRelay = (maxAttempts: number) =>
        relayWith(
          inProcessPublisher({
            'order.placed': () => {
              throw new RangeError('the warehouse refused the order');
            },
          }),
          { maxAttempts },
        );
      const billing = idempotentConsumer({
        db,
        name: 'billing',
        clock,
        onEvent: telemetry.onEvent,
      });
      /** A relay that hands each placed order to `billing`, and what it delivered. */
      const billingRelay = () => {
        const delivered: OutboxMessage[] = [];
        const relay = relayWith(
          inProcessPublisher({
            'order.placed': async (message) => {
              delivered.push(message);
              await billing.handle(message, async (tx) => tx.execute(sql`select 1`));
            },
          }),
        );
        return { relay, delivered };
      };
      return { db, otel, events, placeOrders, relayWith, refusedRelay, billing, billingRelay };
    };

    /**
     * The one point of the lag histogram `name`: `count` values with `attributes`, each the
     * clock's lead less at most half of it (seconds).
     */
    const expectLag = async (
      otel: OtelHarness,
      name: string,
      { attributes, count }: { attributes: Record<string, string>; count: number },
    ) => {
      const [lag, ...others] = await otel.points(name);
      expect(others).toEqual([]);
      expect(lag?.attributes).toEqual(attributes);
      expect(lag?.count).toBe(count);
      expect(lag?.min).toBeGreaterThan(AHEAD_MS / 2_000);
      expect(lag?.max).toBeLessThanOrEqual(AHEAD_MS / 1_000 + 0.001);
    };

    const CONSUMER = { 'messaging.consumer.group.name': 'billing', ...PLACED };
    /** idem.inbox.handled holds these points and no other: billing's, by outcome. */
    const expectHandled = async (otel: OtelHarness, points: [Record<string, string>, number][]) => {
      const handled = await otel.points('idem.inbox.handled');
      expect(handled).toHaveLength(points.length);
      for (const [attributes, value] of points) {
        expect(handled).toContainEqual({ attributes: { ...CONSUMER, ...attributes }, value });
      }
    };

    it('idem.outbox.enqueued: one per event written, by topic', async () => {
      const { db, otel, events, placeOrders } = await setUp();
      await placeOrders('o-1', 'o-2');
      await db.transaction((tx) =>
        events.enqueue(tx, { topic: 'order.shipped', payload: { orderId: 'o-1' } }),
      );
      const points = await otel.points('idem.outbox.enqueued');
      expect(points).toHaveLength(2);
      expect(points).toContainEqual({ attributes: PLACED, value: 2 });
      expect(points).toContainEqual({ attributes: SHIPPED, value: 1 });
      const [count] = await rows<{ n: number | string }>(
        db,
        sql`select count(*) as n from idem_outbox`,
      );
      expect(Number(count?.n)).toBe(3);
    });

    it('idem.outbox.published and idem.outbox.publish.lag: per event a relay settled', async () => {
      const { otel, placeOrders, relayWith } = await setUp();
      await placeOrders('o-1', 'o-2', 'o-3');
      const relay = relayWith(inProcessPublisher({ 'order.placed': () => {} }));
      expect((await relay.runOnce()).published).toBe(3);

      expect(await otel.points('idem.outbox.published')).toEqual([
        { attributes: PLACED, value: 3 },
      ]);
      await expectLag(otel, 'idem.outbox.publish.lag', { attributes: PLACED, count: 3 });
    });

    it('idem.outbox.retries: a failed publish that will be tried again, with error.type', async () => {
      const { otel, placeOrders, refusedRelay } = await setUp();
      await placeOrders('o-1');
      const relay = refusedRelay(3);
      expect((await relay.runOnce()).retried).toBe(1);
      expect(await otel.points('idem.outbox.retries')).toEqual([
        { attributes: { ...PLACED, 'error.type': 'RangeError' }, value: 1 },
      ]);
      expect(await otel.total('idem.outbox.published')).toBe(0);
      expect(await otel.total('idem.outbox.dead_lettered')).toBe(0);
    });

    it('idem.outbox.dead_lettered: an event out of attempts', async () => {
      const { otel, placeOrders, refusedRelay } = await setUp();
      await placeOrders('o-1', 'o-2');
      const relay = refusedRelay(1);
      expect((await relay.runOnce()).deadLettered).toBe(2);
      expect(await otel.points('idem.outbox.dead_lettered')).toEqual([
        { attributes: { ...PLACED, 'error.type': 'RangeError' }, value: 2 },
      ]);
      expect(await otel.total('idem.outbox.retries')).toBe(0);
    });

    it('idem.inbox.handled and idem.outbox.consume.lag: processed, duplicate and failed deliveries', async () => {
      const { db, otel, placeOrders, billing, billingRelay } = await setUp();
      const [first] = await placeOrders('o-1', 'o-2');
      const { relay, delivered } = billingRelay();
      expect((await relay.runOnce()).published).toBe(2);
      // A redelivery of the first event, as a broker would make after a lost ack.
      const again = delivered.find((message) => message.id === first);
      expect(again).toBeDefined();
      const copy = await billing.handle(again as OutboxMessage, async () => 'never runs');
      expect(copy).toEqual({ status: 'duplicate' });
      const failure = new TypeError('no such customer');
      await expect(
        billing.handle({ id: crypto.randomUUID(), topic: 'order.placed' }, async () => {
          throw failure;
        }),
      ).rejects.toBe(failure);

      await expectHandled(otel, [
        [{ 'idem.outcome': 'processed' }, 2],
        [{ 'idem.outcome': 'duplicate' }, 1],
        [{ 'idem.outcome': 'failed', 'error.type': 'TypeError' }, 1],
      ]);
      // Only a processed delivery has a lag: from the producing transaction to its commit.
      await expectLag(otel, 'idem.outbox.consume.lag', { attributes: CONSUMER, count: 2 });
      const [inbox] = await rows<{ n: number | string }>(
        db,
        sql`select count(*) as n from idem_inbox where consumer = 'billing'`,
      );
      expect(Number(inbox?.n)).toBe(2);
    });

    it('spans: one per delivery a consumer handled, with its outcome and event id', async () => {
      const { otel, placeOrders, billing, billingRelay } = await setUp();
      const [id] = await placeOrders('o-1');
      const { relay, delivered } = billingRelay();
      expect((await relay.runOnce()).published).toBe(1);
      await billing.handle(delivered[0] as OutboxMessage, async () => 'never runs');
      const failedId = crypto.randomUUID();
      await expect(
        billing.handle({ id: failedId, topic: 'order.placed' }, async () => {
          throw new TypeError('no such customer');
        }),
      ).rejects.toThrow('no such customer');

      const spans = otel.spans();
      expect(spans.map((span) => [span.name, span.kind, span.attributes['idem.outcome']])).toEqual([
        ['process order.placed', SpanKind.CONSUMER, 'processed'],
        ['process order.placed', SpanKind.CONSUMER, 'duplicate'],
        ['process order.placed', SpanKind.CONSUMER, 'failed'],
      ]);
      expect(spans[0]?.attributes).toEqual({
        'messaging.consumer.group.name': 'billing',
        'messaging.destination.name': 'order.placed',
        'messaging.operation.type': 'process',
        'messaging.operation.name': 'process',
        'messaging.message.id': id,
        'idem.outcome': 'processed',
      });
      expect(spans[0]?.status.code).toBe(SpanStatusCode.UNSET);
      expect(spans[2]?.attributes).toMatchObject({
        'messaging.message.id': failedId,
        'error.type': 'TypeError',
      });
      expect(spans[2]?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'TypeError' });
    });

    it('idem.outbox.consume.lag and idem.inbox.handled for a batch consumer: per event of the batch', async () => {
      const { otel, events, placeOrders, relayWith, billing } = await setUp();
      await placeOrders('o-1', 'o-2', 'o-3');
      const relay = relayWith(
        inProcessPublisher(
          {
            'order.placed': {
              batch: (messages) =>
                billing.handleBatch(messages, async (fresh, tx) => {
                  // The second is a poison event: it fails alone, its neighbours commit.
                  if (fresh.some((message) => message.payload.orderId === 'o-2')) {
                    throw new RangeError('no such customer');
                  }
                  await tx.execute(sql`select 1`);
                }),
            },
          },
          { events },
        ),
        { maxAttempts: 3 },
      );
      const round = await relay.runOnce();
      expect(round.published).toBe(2);
      expect(round.retried).toBe(1);

      await expectHandled(otel, [
        [{ 'idem.outcome': 'processed' }, 2],
        [{ 'idem.outcome': 'failed', 'error.type': 'RangeError' }, 1],
      ]);
      await expectLag(otel, 'idem.outbox.consume.lag', { attributes: CONSUMER, count: 2 });
      // A span per event, each saying how large its batch was.
      expect(otel.spans().map((span) => span.attributes['messaging.batch.message_count'])).toEqual([
        3, 3, 3,
      ]);
      expect(await otel.points('idem.outbox.retries')).toEqual([
        { attributes: { ...PLACED, 'error.type': 'RangeError' }, value: 1 },
      ]);
    });
  });
}
