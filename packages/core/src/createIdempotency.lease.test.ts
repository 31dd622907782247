import { describe, expect, it } from 'vitest';
import {
  deferred,
  freezable,
  LEASE_MS,
  rejection,
  request,
  settle,
  setup,
  startRunning,
} from '../test/engineFixtures.js';
import { createIdempotency } from './createIdempotency.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import { isRequestInProgressError } from './errors/RequestInProgressError.js';
import type { IdempotencyEvent } from './IdempotencyOptions.js';
import { leaseTokenOf } from './store/record.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

/**
 * The engine while a key is held: what a duplicate is told or waits for, a takeover after a
 * crash, and a holder that lost its lease (cut off, or taken over) fenced out.
 */

describe('createIdempotency', () => {
  it('answers a duplicate of a running request with in-progress and the time left', async () => {
    const { engine, clock } = setup();
    const { first, finish } = await startRunning(engine, request);
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
    const { engine, clock } = setup({ inProgressRetryAfterMs: 10_000 });
    const { first, finish } = await startRunning(engine, request);
    clock.advance(500);
    const error = await rejection(engine.execute(request, () => 'duplicate'));
    expect((error as { retryAfterMs: number }).retryAfterMs).toBe(LEASE_MS - 500);
    finish('first');
    await first;
  });

  it('lets a duplicate wait for the first request and replay it when configured', async () => {
    const { engine, clock } = setup({ inProgress: { waitMs: 5_000, pollMs: 100 } });
    const { first, finish } = await startRunning(engine, request);
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

    const paused = deferred<void>();
    const handed: { signal?: AbortSignal } = {};
    const zombieRun = zombie.execute(request, async (ctx) => {
      handed.signal = ctx.signal;
      await paused.promise;
      return 'zombie result';
    });
    await settle();
    const { signal } = handed;
    if (signal === undefined) throw new Error('the zombie never reached its handler');
    // Heartbeats hang: the store is unreachable from the zombie.
    partitioned.freeze();
    clock.advance(LEASE_MS);
    expect(signal.aborted).toBe(true);
    expect(isLeaseLostError(signal.reason)).toBe(true);

    const taken = await healthy.execute(request, () => 'healthy result');
    expect(taken).toMatchObject({ value: 'healthy result', version: 2 });

    paused.resolve();
    await settle();
    const replay = await healthy.execute(request, () => 'never');
    expect(replay).toMatchObject({ value: 'healthy result', replayed: true });
    expect(events.filter((event) => event.type === 'completed')).toHaveLength(1);
    void zombieRun;
  });

  it('fails a taken-over holder with LeaseLostError and keeps the new holder’s outcome', async () => {
    // No heartbeat between claim and completion: the handler blocks the "event loop" in
    // the sense that its lease runs out while nothing renews it.
    const { engine, store, events } = setup({ heartbeatMs: LEASE_MS - 1 });
    const paused = deferred<void>();
    const slow = engine.execute(request, async () => {
      await paused.promise;
      return 'slow';
    });
    await settle();
    // Another server, whose clock the store trusts, takes over after the lease.
    const holder = await store.get(request.scope, request.key);
    if (holder === null) throw new Error('the slow request holds no key');
    await store.release(leaseTokenOf(holder));
    const fast = await engine.execute(request, () => 'fast');
    expect(fast).toMatchObject({ value: 'fast', version: 2 });
    paused.resolve();
    const error = await rejection(slow);
    expect(isLeaseLostError(error)).toBe(true);
    expect(events.some((event) => event.type === 'lease_lost' && event.version === 1)).toBe(true);
    expect((await engine.execute(request, () => 'again')).value).toBe('fast');
  });
});
