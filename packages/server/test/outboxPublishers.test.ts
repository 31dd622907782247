import { describe, expect, expectTypeOf, it } from 'vitest';
import { isInvalidEventError } from '../src/outbox/errors/InvalidEventError.js';
import type { OutboxMessage } from '../src/outbox/OutboxMessage.js';
import { inProcessPublisher } from '../src/outbox/publishers/inProcessPublisher.js';
import { events } from './outbox/fixtures.js';

const message = (topic: string, payload: unknown): OutboxMessage => ({
  id: '00000000-0000-4000-8000-000000000001',
  topic,
  aggregateKey: null,
  payload,
  headers: {},
  createdAt: new Date(0),
});

describe('inProcessPublisher', () => {
  it('hands each event to its topic’s handler, parsed by the schema when events are given', async () => {
    const seen: unknown[] = [];
    const publisher = inProcessPublisher(
      {
        'order.placed': (event) => {
          expectTypeOf(event.payload).toEqualTypeOf<{ orderId: string; totalCents: number }>();
          expectTypeOf(event.topic).toEqualTypeOf<'order.placed'>();
          seen.push(event.payload);
        },
      },
      { events },
    );
    await publisher.publish(message('order.placed', { orderId: 'o', totalCents: 1, extra: true }));
    expect(seen).toEqual([{ orderId: 'o', totalCents: 1 }]);
  });

  it('fails an event whose payload no longer matches, or whose handler throws', async () => {
    const failure = new Error('handler failed');
    const publisher = inProcessPublisher(
      {
        'order.placed': () => {},
        'order.shipped': () => {
          throw failure;
        },
      },
      { events },
    );
    const error = await publisher
      .publish(message('order.placed', { orderId: 1 }))
      .catch((caught: unknown) => caught);
    expect(isInvalidEventError(error)).toBe(true);
    await expect(
      publisher.publish(message('order.shipped', { orderId: 'o', carrier: 'ups' })),
    ).rejects.toBe(failure);
  });

  it('fails an event without a handler, unless told to ignore unknown topics', async () => {
    await expect(inProcessPublisher({}).publish(message('order.placed', {}))).rejects.toThrow(
      /no handler for topic "order\.placed"/,
    );
    await expect(
      inProcessPublisher({}, { ignoreUnknownTopics: true }).publish(message('nope', {})),
    ).resolves.toBeUndefined();
    // Inherited properties are not handlers.
    await expect(inProcessPublisher({}).publish(message('toString', {}))).rejects.toThrow(
      /no handler/,
    );
  });

  it('publishBatch: a batch handler gets its topic’s events at once; each event gets its own result', async () => {
    const withId = (id: number, topic: string, payload: unknown): OutboxMessage => ({
      ...message(topic, payload),
      id: `00000000-0000-4000-8000-${String(id).padStart(12, '0')}`,
    });
    const batches: number[][] = [];
    const publisher = inProcessPublisher(
      {
        'test.numbered': {
          batch: async (numbered) => {
            expectTypeOf(numbered[0]?.payload.n).toEqualTypeOf<number | undefined>();
            batches.push(numbered.map((event) => event.payload.n));
            return numbered.map((event) =>
              event.payload.poison
                ? { id: event.id, status: 'failed', error: new Error(`poison ${event.payload.n}`) }
                : { id: event.id, status: 'processed' },
            );
          },
        },
        'order.shipped': () => {
          throw new Error('shipping down');
        },
      },
      { events },
    );
    const results = await publisher.publishBatch?.([
      withId(1, 'test.numbered', { n: 1 }),
      withId(2, 'order.shipped', { orderId: 'o', carrier: 'dhl' }),
      withId(3, 'test.numbered', { n: 'not a number' }),
      withId(4, 'test.numbered', { n: 4, poison: true }),
      withId(5, 'nope', {}),
      withId(6, 'test.numbered', { n: 6 }),
    ]);
    expect(batches).toEqual([[1, 4, 6]]);
    expect(results?.map((result) => result.ok)).toEqual([true, false, false, false, false, true]);
    const errorOf = (index: number) => {
      const result = results?.[index];
      return result && !result.ok ? result.error : undefined;
    };
    expect(errorOf(1)).toEqual(new Error('shipping down'));
    expect(isInvalidEventError(errorOf(2))).toBe(true);
    expect(errorOf(3)).toEqual(new Error('poison 4'));
    expect(String(errorOf(4))).toMatch(/no handler for topic "nope"/);

    // One event through publish() goes to the batch handler alone; a throw fails it.
    await publisher.publish(withId(7, 'test.numbered', { n: 7 }));
    expect(batches.at(-1)).toEqual([7]);
    await expect(
      publisher.publish(withId(8, 'test.numbered', { n: 8, poison: true })),
    ).rejects.toThrow('poison 8');
    // A batch handler that answers for only some events fails the others, by name.
    const partial = inProcessPublisher({ 'order.placed': { batch: async () => [] } });
    await expect(partial.publish(message('order.placed', {}))).rejects.toThrow(
      /no result for event/,
    );
  });
});
