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
});
