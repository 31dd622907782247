import { isIdempotencyError } from '@idem/core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { defineEvents, type EventInput } from '../src/outbox/defineEvents.js';
import {
  type InvalidEventError,
  isInvalidEventError,
} from '../src/outbox/errors/InvalidEventError.js';
import { backends } from './harness.js';
import { events, outboxRows, useOutboxDatabase } from './outbox/fixtures.js';

const rejection = (promise: Promise<unknown>): Promise<InvalidEventError> =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => {
      expect(isInvalidEventError(error)).toBe(true);
      return error as InvalidEventError;
    },
  );

for (const backend of backends) {
  describe(`enqueue on ${backend}`, () => {
    const fresh = useOutboxDatabase(backend);

    it('writes the event in the caller’s transaction and returns its id', async () => {
      const { db } = await fresh();
      const id = await db.transaction((tx) =>
        events.enqueue(tx, {
          topic: 'order.placed',
          aggregateKey: 'order-1',
          payload: { orderId: 'order-1', totalCents: 1299 },
          headers: { 'trace-id': 'abc' },
        }),
      );
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const [row] = await outboxRows(db);
      expect(row).toMatchObject({
        id,
        topic: 'order.placed',
        aggregate_key: 'order-1',
        attempts: 0,
        sent: false,
        dead: false,
      });
    });

    it('enqueues a list in order, and an empty list writes nothing', async () => {
      const { db } = await fresh();
      const ids = await db.transaction((tx) =>
        events.enqueue(
          tx,
          [1, 2, 3].map((n) => ({ topic: 'test.numbered' as const, payload: { n } })),
        ),
      );
      expect(ids).toHaveLength(3);
      expect((await outboxRows(db)).map((row) => row.id)).toEqual(ids);
      expect(await events.enqueue(db, [])).toEqual([]);
      expect(await outboxRows(db)).toHaveLength(3);
    });

    it('leaves no event behind when the business transaction rolls back', async () => {
      const { db } = await fresh();
      const failure = new Error('card declined');
      await expect(
        db.transaction(async (tx) => {
          await events.enqueue(tx, {
            topic: 'order.placed',
            aggregateKey: 'order-2',
            payload: { orderId: 'order-2', totalCents: 500 },
          });
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(await outboxRows(db)).toEqual([]);
    });

    it('refuses an unknown topic, naming the known ones', async () => {
      const { db } = await fresh();
      const error = await rejection(
        // @ts-expect-error: not a defined topic
        events.enqueue(db, { topic: 'order.cancelled', payload: {} }),
      );
      expect(error.reason).toBe('unknown_topic');
      expect(error.topic).toBe('order.cancelled');
      expect(error.message).toContain('"order.placed"');
      expect(isIdempotencyError(error)).toBe(true);
      expect(error.code).toBe('INVALID_EVENT');
    });

    it('refuses a payload that fails its schema, with the paths, before writing any event', async () => {
      const { db } = await fresh();
      const error = await rejection(
        db.transaction((tx) =>
          // @ts-expect-error: totalCents must be a number
          events.enqueue(tx, [
            { topic: 'order.placed', payload: { orderId: 'fine', totalCents: 1 } },
            { topic: 'order.placed', payload: { orderId: 'o', totalCents: '12' } },
          ]),
        ),
      );
      expect(error.reason).toBe('invalid_payload');
      expect(error.index).toBe(1);
      expect(error.issues.map((issue) => issue.path)).toEqual(['totalCents']);
      expect(error.message).toMatch(/Event "order\.placed" \(index 1\).*totalCents:/);
      expect(await outboxRows(db)).toEqual([]);
    });

    it('validates what will be stored: JSON (a Date becomes a string)', async () => {
      const { db } = await fresh();
      const dated = defineEvents({ 'x.dated': z.object({ at: z.date() }) });
      const error = await rejection(
        dated.enqueue(db, { topic: 'x.dated', payload: { at: new Date() } }),
      );
      expect(error.reason).toBe('invalid_payload');
      expect(error.issues[0]?.path).toBe('at');
    });

    it('refuses an oversized payload with both sizes in the message', async () => {
      const { db } = await fresh();
      const small = defineEvents(
        { 'x.blob': z.object({ data: z.string() }) },
        { maxPayloadBytes: 1_024 },
      );
      const error = await rejection(
        small.enqueue(db, { topic: 'x.blob', payload: { data: 'é'.repeat(600) } }),
      );
      expect(error.reason).toBe('payload_too_large');
      expect(error.message).toContain('1211 bytes'); // {"data":"…"}: 11 + 600 × 2
      expect(error.message).toContain('1024 bytes');
      await small.enqueue(db, { topic: 'x.blob', payload: { data: 'é'.repeat(500) } });
      expect(await outboxRows(db)).toHaveLength(1);
    });

    it('refuses payloads JSON or jsonb cannot hold, and bad headers or keys', async () => {
      const { db } = await fresh();
      const loose = defineEvents({ 'x.any': z.any() });
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      for (const payload of [{ big: 1n }, cyclic, undefined, { text: 'a\u0000b' }, 'x\ud800']) {
        const error = await rejection(loose.enqueue(db, { topic: 'x.any', payload }));
        expect(error.reason).toBe('unserializable_payload');
      }
      // An escaped backslash followed by "u0000" is ordinary text; null is a payload too.
      await loose.enqueue(db, { topic: 'x.any', payload: '\\u0000' });
      await loose.enqueue(db, { topic: 'x.any', payload: null });

      const badHeaders = await rejection(
        loose.enqueue(db, { topic: 'x.any', payload: 1, headers: { 'bad name': 'v' } }),
      );
      expect(badHeaders.reason).toBe('invalid_headers');
      const badValue = await rejection(
        // @ts-expect-error: header values are strings
        loose.enqueue(db, { topic: 'x.any', payload: 1, headers: { n: 1 } }),
      );
      expect(badValue.reason).toBe('invalid_headers');
      const badKey = await rejection(
        loose.enqueue(db, { topic: 'x.any', payload: 1, aggregateKey: '' }),
      );
      expect(badKey.reason).toBe('invalid_aggregate_key');
      expect(await outboxRows(db)).toHaveLength(2);
    });

    it('parses a delivered payload with its topic’s schema', async () => {
      await expect(
        events.parse('order.shipped', { orderId: 'o', carrier: 'dhl', extra: 1 }),
      ).resolves.toEqual({ orderId: 'o', carrier: 'dhl' });
      const error = await rejection(
        events.parse('order.shipped', { orderId: 'o', carrier: 'fedex' }),
      );
      expect(error.reason).toBe('invalid_payload');
      // @ts-expect-error: not a defined topic
      expect((await rejection(events.parse('nope', {}))).reason).toBe('unknown_topic');
    });
  });
}

describe('defineEvents types', () => {
  it('types enqueue by topic and parse by the schema’s output', () => {
    const defined = defineEvents({
      'a.created': z.object({ id: z.string(), count: z.coerce.number() }),
    });
    type Input = EventInput<typeof defined.schemas>;
    expectTypeOf<Extract<Input, { topic: 'a.created' }>['payload']>().toEqualTypeOf<{
      id: string;
      count: unknown;
    }>();
    type Parsed = Awaited<ReturnType<typeof defined.parse<'a.created'>>>;
    expectTypeOf<Parsed>().toEqualTypeOf<{ id: string; count: number }>();
  });

  it('refuses a non-positive maxPayloadBytes', () => {
    expect(() => defineEvents({}, { maxPayloadBytes: 0 })).toThrow(/maxPayloadBytes/);
  });
});
