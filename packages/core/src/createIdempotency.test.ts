import { describe, expect, it } from 'vitest';
import { rejection, request, setup } from '../test/engineFixtures.js';
import { createIdempotency, wasReplayed } from './createIdempotency.js';
import { isConfigurationError } from './errors/ConfigurationError.js';
import { isInvalidKeyError } from './errors/InvalidKeyError.js';
import { isKeyMismatchError } from './errors/KeyMismatchError.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

/**
 * The engine's answers for one key: a run and its replay, the same request in any key
 * order, refusals, stored and released errors, derived keys, the handler's context, and
 * settings. A held key's duplicates and lost leases: createIdempotency.lease.test.ts.
 */

const input = { sku: 'tea', quantity: 2 };

describe('createIdempotency', () => {
  it('runs a new key once and replays the stored value after', async () => {
    const { engine, events } = setup();
    let runs = 0;
    const handler = async () => ({
      orderId: ++runs,
      at: new Date('2026-01-01T00:00:00Z'),
      total: 12n,
    });

    const first = await engine.execute(request, handler);
    const second = await engine.execute(request, handler);

    expect(first).toMatchObject({ replayed: false, version: 1 });
    expect(second).toEqual({ value: first.value, replayed: true, version: 1 });
    expect(second.value.at).toBeInstanceOf(Date);
    expect(runs).toBe(1);
    expect(events.map((event) => event.type)).toEqual(['claimed', 'completed', 'replayed']);
  });

  it('treats inputs with the same content in another key order as the same request', async () => {
    const { engine } = setup();
    const { scope, key } = request;
    await engine.execute({ scope, key, input: { a: 1, b: [1, 2] } }, () => 'ok');
    const again = await engine.execute({ scope, key, input: { b: [1, 2], a: 1 } }, () => 'rerun');
    expect(again).toMatchObject({ value: 'ok', replayed: true });
  });

  it('refuses the same key with another payload', async () => {
    const { engine } = setup();
    const { scope, key } = request;
    await engine.execute({ scope, key, input }, () => 'ok');
    const error = await rejection(
      engine.execute({ scope, key, input: { ...input, quantity: 3 } }, () => 'no'),
    );
    expect(isKeyMismatchError(error)).toBe(true);
  });

  it('refuses invalid keys and missing scopes with typed errors', async () => {
    const { engine } = setup();
    expect(
      isInvalidKeyError(await rejection(engine.execute({ ...request, key: '' }, () => 1))),
    ).toBe(true);
    expect(
      isInvalidKeyError(await rejection(engine.execute({ ...request, key: 'é' }, () => 1))),
    ).toBe(true);
    expect(
      isConfigurationError(await rejection(engine.execute({ ...request, scope: '' }, () => 1))),
    ).toBe(true);
  });

  it('stores deterministic errors and replays them exactly', async () => {
    const { engine } = setup();
    let runs = 0;
    const decline = () => {
      runs++;
      throw Object.assign(new Error('Card declined'), {
        name: 'PaymentError',
        code: 'CARD_DECLINED',
        status: 402,
        data: { declineCode: 'insufficient_funds', at: new Date(0) },
      });
    };
    const first = await rejection(engine.execute(request, decline));
    const second = await rejection(engine.execute(request, decline));
    expect(runs).toBe(1);
    expect(wasReplayed(first)).toBe(false);
    expect(wasReplayed(second)).toBe(true);
    expect(second).toMatchObject({
      name: 'PaymentError',
      message: 'Card declined',
      code: 'CARD_DECLINED',
      status: 402,
      data: { declineCode: 'insufficient_funds', at: new Date(0) },
    });
  });

  it('releases the key on a transient error so the retry runs again', async () => {
    const { engine, events } = setup();
    let runs = 0;
    const flaky = async () => {
      runs++;
      if (runs === 1) throw new Error('connection reset');
      return 'second time lucky';
    };
    const error = await rejection(engine.execute(request, flaky));
    expect((error as Error).message).toBe('connection reset');
    const retry = await engine.execute(request, flaky);
    expect(retry).toMatchObject({ value: 'second time lucky', replayed: false, version: 2 });
    expect(runs).toBe(2);
    expect(events.map((event) => event.type)).toEqual([
      'claimed',
      'released',
      'takeover',
      'completed',
    ]);
  });

  it('honours a custom error policy', async () => {
    const clock = manualClock();
    const engine = createIdempotency({
      store: memoryStore({ clock }),
      clock,
      errorPolicy: (error) => ((error as Error).message === 'sold out' ? 'store' : 'release'),
    });
    let runs = 0;
    const soldOut = () => {
      runs++;
      throw new Error('sold out');
    };
    await rejection(engine.execute(request, soldOut));
    const replayed = await rejection(engine.execute(request, soldOut));
    expect(runs).toBe(1);
    expect((replayed as Error).message).toBe('sold out');
  });

  it('derives downstream keys that differ by scope and suffix', async () => {
    const { engine } = setup();
    const keys = await Promise.all(
      ['user:1/pay', 'user:2/pay'].map(
        async (scope) =>
          (
            await engine.execute({ ...request, scope }, (ctx) => [
              ctx.deriveKey('charge'),
              ctx.deriveKey('refund'),
            ])
          ).value,
      ),
    );
    const flat = keys.flat();
    expect(new Set(flat).size).toBe(4);
    for (const key of flat) expect(key).toMatch(/^idem-[0-9a-f]{32}-(charge|refund)$/);
  });

  it('hands the handler a context it may take apart', async () => {
    const { engine } = setup();
    const ran = await engine.execute(
      request,
      async ({ key, scope, attempt, version, takeover, step, deriveKey, signal }) => ({
        key,
        scope,
        attempt,
        version,
        takeover,
        charged: await step('charge', () => 'ch_1'),
        derived: deriveKey('charge'),
        aborted: signal.aborted,
      }),
    );
    expect(ran.value).toMatchObject({
      key: request.key,
      scope: request.scope,
      attempt: 1,
      version: 1,
      takeover: false,
      charged: 'ch_1',
      aborted: false,
    });
    expect(ran.value.derived).toMatch(/^idem-[0-9a-f]{32}-charge$/);
  });

  it('refuses settings that cannot work', () => {
    const store = memoryStore();
    const attempt = (options: Parameters<typeof createIdempotency>[0]) => () =>
      createIdempotency(options);
    expect(attempt({ store, leaseMs: 0 })).toThrow(/leaseMs must be a positive/);
    expect(attempt({ store, leaseMs: 10_000, ttlMs: 5_000 })).toThrow(
      /ttlMs \(5000\) must be longer than leaseMs/,
    );
    expect(attempt({ store, ttlMs: 3_600_000, retryWindowMs: 7_200_000 })).toThrow(
      /shorter than retryWindowMs/,
    );
    expect(attempt({ store, leaseMs: 1_000, heartbeatMs: 1_000 })).toThrow(/heartbeatMs/);
    try {
      createIdempotency({ store, leaseMs: -1 });
    } catch (error) {
      expect(isConfigurationError(error)).toBe(true);
    }
  });
});
