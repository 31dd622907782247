import { describe, expect, it } from 'vitest';
import { createIdempotency, wasReplayed } from './createIdempotency.js';
import { isConfigurationError } from './errors/ConfigurationError.js';
import { isInvalidKeyError } from './errors/InvalidKeyError.js';
import { isKeyMismatchError } from './errors/KeyMismatchError.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import { isRequestInProgressError } from './errors/RequestInProgressError.js';
import type { IdempotencyEvent } from './IdempotencyOptions.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';
import { leaseTokenOf } from './store/record.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

const LEASE_MS = 3_000;

/** A store whose calls can be made to hang, as if the process holding them froze or died. */
function freezable(store: IdempotencyStore) {
  let frozen = false;
  const hang = new Promise<never>(() => {});
  const proxy = new Proxy(store, {
    get(target, property: keyof IdempotencyStore) {
      const method = target[property] as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => (frozen ? hang : method.apply(target, args));
    },
  });
  return { store: proxy, freeze: () => (frozen = true) };
}

/** Lets pending callbacks (Web Crypto digests included) run without moving the clock. */
const settle = async () => {
  for (let index = 0; index < 10; index++) await new Promise((resolve) => setImmediate(resolve));
};

function setup(options: { events?: IdempotencyEvent[] } = {}) {
  const clock = manualClock();
  const store = memoryStore({ clock });
  const events = options.events ?? [];
  const engine = createIdempotency({
    store,
    clock,
    leaseMs: LEASE_MS,
    ttlMs: 60_000,
    onEvent: (event) => events.push(event),
  });
  return { clock, store, engine, events };
}

const input = { sku: 'tea', quantity: 2 };
/**
 * A precomputed fingerprint keeps Web Crypto (which answers on another thread) out of the
 * concurrency tests, so `settle()` reliably lets every started request reach its handler.
 */
const request = { scope: 'user:1/orders.create', key: 'k-1', fingerprint: 'fp-tea-2' };

const rejection = async (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

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

  it('answers a duplicate of a running request with in-progress and the time left', async () => {
    const { engine, clock } = setup();
    let finish!: (value: string) => void;
    const first = engine.execute(
      request,
      () => new Promise<string>((resolve) => (finish = resolve)),
    );
    await settle();
    clock.advance(1_000);
    const error = await rejection(engine.execute(request, () => 'duplicate'));
    expect(isRequestInProgressError(error)).toBe(true);
    // The lease (renewed to 4 000 ms by the heartbeat at 1 000 ms) has 3 000 ms left, but a
    // duplicate is told to come back after at most inProgressRetryAfterMs (1 000 ms).
    expect((error as { retryAfterMs: number }).retryAfterMs).toBe(1_000);
    finish('first');
    expect((await first).value).toBe('first');
  });

  it('tells a duplicate the time left on the lease when that is shorter than the cap', async () => {
    const clock = manualClock();
    const engine = createIdempotency({
      store: memoryStore({ clock }),
      clock,
      leaseMs: LEASE_MS,
      ttlMs: 60_000,
      inProgressRetryAfterMs: 10_000,
    });
    let finish!: (value: string) => void;
    const first = engine.execute(
      request,
      () => new Promise<string>((resolve) => (finish = resolve)),
    );
    await settle();
    clock.advance(500);
    const error = await rejection(engine.execute(request, () => 'duplicate'));
    expect((error as { retryAfterMs: number }).retryAfterMs).toBe(LEASE_MS - 500);
    finish('first');
    await first;
  });

  it('lets a duplicate wait for the first request and replay it when configured', async () => {
    const clock = manualClock();
    const engine = createIdempotency({
      store: memoryStore({ clock }),
      clock,
      leaseMs: LEASE_MS,
      ttlMs: 60_000,
      inProgress: { waitMs: 5_000, pollMs: 100 },
    });
    let finish!: (value: string) => void;
    const first = engine.execute(
      request,
      () => new Promise<string>((resolve) => (finish = resolve)),
    );
    await settle();
    const duplicate = engine.execute(request, () => 'duplicate ran');
    await settle();
    clock.advance(250);
    finish('first');
    await first;
    clock.advance(100);
    await settle();
    expect(await duplicate).toMatchObject({ value: 'first', replayed: true });
  });

  it('takes over after a crash and resumes after the last finished step', async () => {
    const clock = manualClock();
    const shared = memoryStore({ clock });
    const crashed = freezable(shared);
    const options = { clock, leaseMs: LEASE_MS, ttlMs: 60_000 };
    const before = createIdempotency({ ...options, store: crashed.store });
    const after = createIdempotency({ ...options, store: shared });
    const charges: string[] = [];
    const derived: string[] = [];

    const checkout = async (ctx: Parameters<Parameters<typeof before.execute>[1]>[0]) => {
      derived.push(ctx.deriveKey('charge'));
      const charge = await ctx.step('charge', async () => {
        charges.push(`charge for ${ctx.key}`);
        return { chargeId: `ch_${charges.length}` };
      });
      if (!ctx.takeover) {
        crashed.freeze();
        return new Promise<never>(() => {});
      }
      return { ...charge, attempt: ctx.attempt };
    };

    void before.execute(request, checkout);
    await settle();
    const blocked = await rejection(after.execute(request, checkout));
    expect(isRequestInProgressError(blocked)).toBe(true);

    clock.advance(LEASE_MS);
    const result = await after.execute(request, checkout);
    expect(result).toMatchObject({
      replayed: false,
      version: 2,
      value: { chargeId: 'ch_1', attempt: 2 },
    });
    expect(charges).toEqual(['charge for k-1']);
    expect(derived[0]).toBe(derived[1]);
  });

  it('aborts a holder that cannot renew its lease and fences its late completion', async () => {
    const clock = manualClock();
    const shared = memoryStore({ clock });
    const partitioned = freezable(shared);
    const events: IdempotencyEvent[] = [];
    const options = {
      clock,
      leaseMs: LEASE_MS,
      ttlMs: 60_000,
      onEvent: (event: IdempotencyEvent) => events.push(event),
    };
    const zombie = createIdempotency({ ...options, store: partitioned.store });
    const healthy = createIdempotency({ ...options, store: shared });

    let resume!: () => void;
    let signal!: AbortSignal;
    const zombieRun = zombie.execute(request, async (ctx) => {
      signal = ctx.signal;
      await new Promise<void>((resolve) => (resume = resolve));
      return 'zombie result';
    });
    await settle();
    // Heartbeats hang: the store is unreachable from the zombie.
    partitioned.freeze();
    clock.advance(LEASE_MS);
    expect(signal.aborted).toBe(true);
    expect(isLeaseLostError(signal.reason)).toBe(true);

    const taken = await healthy.execute(request, () => 'healthy result');
    expect(taken).toMatchObject({ value: 'healthy result', version: 2 });

    resume();
    await settle();
    const replay = await healthy.execute(request, () => 'never');
    expect(replay).toMatchObject({ value: 'healthy result', replayed: true });
    expect(events.filter((event) => event.type === 'completed')).toHaveLength(1);
    void zombieRun;
  });

  it('fails a taken-over holder with LeaseLostError and keeps the new holder’s outcome', async () => {
    const clock = manualClock();
    const store = memoryStore({ clock });
    const events: IdempotencyEvent[] = [];
    // No heartbeat between claim and completion: the handler blocks the "event loop" in
    // the sense that its lease runs out while nothing renews it.
    const engine = createIdempotency({
      store,
      clock,
      leaseMs: LEASE_MS,
      heartbeatMs: LEASE_MS - 1,
      ttlMs: 60_000,
      onEvent: (event) => events.push(event),
    });
    let resume!: () => void;
    const slow = engine.execute(request, async () => {
      await new Promise<void>((resolve) => (resume = resolve));
      return 'slow';
    });
    await settle();
    // Another server, whose clock the store trusts, takes over after the lease.
    const holder = await store.get(request.scope, request.key);
    await store.release(leaseTokenOf(holder!));
    const fast = await engine.execute(request, () => 'fast');
    expect(fast).toMatchObject({ value: 'fast', version: 2 });
    resume();
    const error = await rejection(slow);
    expect(isLeaseLostError(error)).toBe(true);
    expect(events.some((event) => event.type === 'lease_lost' && event.version === 1)).toBe(true);
    expect((await engine.execute(request, () => 'again')).value).toBe('fast');
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
