import { describe, expect, it } from 'vitest';
import { rejection, setup } from '../test/engineFixtures.js';
import { wasReplayed } from './createIdempotency.js';
import { defaultErrorPolicy, ReplayedError } from './errorPolicy.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import { taggedJsonSerializer } from './serializer.js';

/**
 * An outcome that cannot be stored, after the procedure ran: it must become the key's
 * stored terminal outcome, never a release (the retry would run the side effects again)
 * and never a key left locked until its lease runs out.
 */

const request = { scope: 'user:1/checkout', key: 'k-1', fingerprint: 'fp-1' };

const cyclic = () => {
  const value: Record<string, unknown> = { cents: 500 };
  value.self = value;
  return value;
};

const deeplyNested = () => {
  let value: unknown = 'bottom';
  for (let depth = 0; depth < 10_000; depth++) value = { inner: value };
  return { cents: 500, receipt: value };
};

describe('an outcome that cannot be stored', () => {
  it.each([
    ['a function inside', () => ({ cents: 500, receipt: { print: () => 'receipt' } })],
    ['a cycle', cyclic],
    ['nesting 10,000 deep', deeplyNested],
  ])(
    'stores a terminal error when the returned value has %s, and never runs the handler again',
    async (_, result) => {
      const { engine, store, events } = setup();
      let charges = 0;
      const checkout = () => {
        charges++;
        return result();
      };

      const first = await rejection(engine.execute(request, checkout));
      const second = await rejection(engine.execute(request, checkout));
      const third = await rejection(engine.execute(request, checkout));

      expect(charges).toBe(1);
      expect(isUnserializableValueError(first)).toBe(true);
      expect(wasReplayed(first)).toBe(false);
      expect((first as Error).message).toMatch(/ran, but its result could not be stored/);
      for (const replay of [second, third]) {
        expect(wasReplayed(replay)).toBe(true);
        expect(replay).toBeInstanceOf(ReplayedError);
        expect(replay).toMatchObject({
          name: 'UnserializableValueError',
          code: 'UNSERIALIZABLE_VALUE',
          message: (first as Error).message,
        });
      }
      const record = await store.get(request.scope, request.key);
      expect(record).toMatchObject({ status: 'completed', version: 1, attempts: 1 });
      expect(record?.outcome?.kind).toBe('error');
      expect(events.map((event) => event.type)).toEqual([
        'claimed',
        'completed',
        'replayed',
        'replayed',
      ]);
      expect(events[1]?.error).toBe(first);
      expect(isUnserializableValueError(events[1]?.unstorable)).toBe(true);
      expect(events[1]?.unstorable).toBe((first as Error).cause);
    },
  );

  it('settles the key when a recovery point’s result cannot be stored: its fn ran, so it never runs again', async () => {
    const { engine, store, events } = setup();
    const charges: string[] = [];
    const shipped: string[] = [];
    let caughtInHandler: unknown;
    const checkout = async (ctx: Parameters<Parameters<typeof engine.execute>[1]>[0]) => {
      try {
        await ctx.step('charge', () => {
          charges.push('charged');
          return { chargeId: 'ch_1', receipt: { print: () => 'receipt' } };
        });
      } catch (error) {
        // A handler that swallows the failure must not get a second chance at the key.
        caughtInHandler = error;
      }
      await ctx.step('ship', () => {
        shipped.push('shipped');
        return 'parcel-1';
      });
      return 'ok';
    };

    const first = await rejection(engine.execute(request, checkout));
    const retry = await rejection(engine.execute(request, checkout));

    expect(charges).toEqual(['charged']);
    expect(shipped).toEqual([]);
    expect(isUnserializableValueError(caughtInHandler)).toBe(true);
    expect(first).toBe(caughtInHandler);
    expect((first as Error).message).toMatch(/recovery point "charge" ran, but its result/);
    expect(wasReplayed(retry)).toBe(true);
    expect(retry).toMatchObject({
      name: 'UnserializableValueError',
      message: (first as Error).message,
    });
    const record = await store.get(request.scope, request.key);
    expect(record).toMatchObject({ status: 'completed', attempts: 1, steps: {} });
    const completed = events.filter((event) => event.type === 'completed');
    expect(completed).toHaveLength(1);
    expect(completed[0]?.error).toBe(first);
    expect(isUnserializableValueError(completed[0]?.unstorable)).toBe(true);
    expect(events.some((event) => event.type === 'released')).toBe(false);
  });
});

describe('an error to store whose data cannot be stored', () => {
  const decline = (data: unknown) =>
    Object.assign(new Error('Card declined'), {
      name: 'PaymentError',
      code: 'CARD_DECLINED',
      status: 402,
      data,
    });

  it('stores name, message, code and status without the data, and never locks the key', async () => {
    const { engine, store, events } = setup();
    let charges = 0;
    const data: Record<string, unknown> = { declineCode: 'insufficient_funds' };
    data.self = data;
    const thrown = decline(data);
    const checkout = () => {
      charges++;
      throw thrown;
    };

    const first = await rejection(engine.execute(request, checkout));
    const retry = await rejection(engine.execute(request, checkout));

    expect(charges).toBe(1);
    expect(first).toBe(thrown);
    expect(wasReplayed(retry)).toBe(true);
    expect(retry).toBeInstanceOf(ReplayedError);
    expect(retry).toMatchObject({
      name: 'PaymentError',
      message: 'Card declined',
      code: 'CARD_DECLINED',
      status: 402,
      data: undefined,
    });
    expect(await store.get(request.scope, request.key)).toMatchObject({
      status: 'completed',
      attempts: 1,
    });
    expect(events.map((event) => event.type)).toEqual(['claimed', 'completed', 'replayed']);
    expect(events[1]?.error).toBe(thrown);
    expect(isUnserializableValueError(events[1]?.unstorable)).toBe(true);
  });

  it('falls back to name, message and code when a custom toStored throws', async () => {
    const { engine } = setup({
      errorPolicy: {
        classify: () => 'store',
        toStored: () => {
          throw new RangeError('Maximum call stack size exceeded');
        },
      },
    });
    let runs = 0;
    const checkout = () => {
      runs++;
      throw decline({ note: 'fine' });
    };
    await rejection(engine.execute(request, checkout));
    const retry = await rejection(engine.execute(request, checkout));
    expect(runs).toBe(1);
    expect(retry).toMatchObject({
      name: 'PaymentError',
      message: 'Card declined',
      code: 'CARD_DECLINED',
    });
  });

  it('defaultErrorPolicy.toStored keeps status and drops data it cannot serialize', () => {
    const stored = defaultErrorPolicy.toStored(
      decline({ print: () => 'receipt' }),
      taggedJsonSerializer,
    );
    expect(stored).toMatchObject({ name: 'PaymentError', message: 'Card declined' });
    const replayed = defaultErrorPolicy.fromStored(
      JSON.parse(JSON.stringify(stored)),
      taggedJsonSerializer,
    );
    expect(replayed).toMatchObject({ status: 402, code: 'CARD_DECLINED', data: undefined });
  });
});

describe('a stored error', () => {
  it('never carries a stack trace', async () => {
    const { engine, store } = setup();
    const inner = new Error('upstream said no');
    // Some libraries' errors serialize their stack (axios' toJSON does).
    const upstream = { toJSON: () => ({ message: inner.message, stack: inner.stack }) };
    const error = Object.assign(new Error('Card declined'), {
      status: 402,
      data: { upstream, at: new Date(0) },
    });
    await rejection(engine.execute(request, () => Promise.reject(error)));
    const record = await store.get(request.scope, request.key);
    const json = JSON.stringify(record?.outcome);
    expect(json).toContain('Card declined');
    expect(json).toContain('upstream said no');
    expect(json).not.toContain('stack');
    expect(json).not.toContain(String(error.stack).split('\n')[1]?.trim());
  });
});
