import { describe, expect, it } from 'vitest';
import { deferred, settle } from '../test/engineFixtures.js';
import type { Clock } from './Clock.js';
import { createIdempotency } from './createIdempotency.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import type { HandlerContext } from './Idempotency.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

const HOUR_MS = 3_600_000;

/**
 * The holder judges its own lease on the monotonic clock; the store (the database's clock)
 * judges takeovers. A wall clock that steps back must not keep a holder that lost its key
 * believing it still holds it.
 */
describe('the holder’s clock', () => {
  it('aborts a cut-off holder on time even when its wall clock steps back an hour', async () => {
    // One manual clock plays real time: the store's (the database's) clock runs on it, and
    // the holder's monotonic clock and timers do too; only the holder's wall clock steps.
    const time = manualClock();
    let wallStepMs = 0;
    const holderClock: Clock = { ...time, now: () => time.now() + wallStepMs };
    const shared = memoryStore({ clock: time });
    // The database is unreachable for heartbeats; everything else goes through.
    const cutOff = new Proxy(shared, {
      get(target, property: keyof IdempotencyStore) {
        if (property === 'heartbeat') {
          return () => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.5:5432'));
        }
        return target[property];
      },
    });
    const options = { leaseMs: 1_500, ttlMs: 60_000 };
    const holder = createIdempotency({ ...options, store: cutOff, clock: holderClock });
    const other = createIdempotency({ ...options, store: shared, clock: time });
    const request = { scope: 'user:1/checkout', key: 'k-1', fingerprint: 'fp' };

    const sideEffects: string[] = [];
    const paused = deferred<void>();
    const handed: { context?: HandlerContext } = {};
    const held = holder.execute(request, async (ctx) => {
      handed.context = ctx;
      await ctx.step('a', () => sideEffects.push('a'));
      await paused.promise;
      await ctx.step('b', () => sideEffects.push('b'));
      return 'holder';
    });
    const outcome = held.then(
      () => 'completed',
      (error: unknown) => error,
    );
    await settle();
    expect(sideEffects).toEqual(['a']);
    const { context } = handed;
    if (context === undefined) throw new Error('the holder never reached its handler');

    time.advance(300);
    wallStepMs = -HOUR_MS; // an NTP correction during the outage
    await settle();
    time.advance(1_200);
    await settle();

    const taken = await other.execute(request, () => 'taker');
    expect(taken).toMatchObject({ value: 'taker', replayed: false, version: 2 });
    expect(context.signal.aborted).toBe(true);
    expect(isLeaseLostError(context.signal.reason)).toBe(true);

    paused.resolve();
    expect(isLeaseLostError(await outcome)).toBe(true);
    expect(sideEffects).toEqual(['a']);
  });

  it('measures a duplicate’s wait on the monotonic clock', async () => {
    const time = manualClock();
    let wallStepMs = 0;
    const clock: Clock = { ...time, now: () => time.now() + wallStepMs };
    const engine = createIdempotency({
      store: memoryStore({ clock: time }),
      clock,
      leaseMs: 3_000,
      ttlMs: 60_000,
      inProgress: { waitMs: 1_000, pollMs: 100 },
    });
    const request = { scope: 's', key: 'k', fingerprint: 'fp' };
    void engine.execute(request, () => new Promise<never>(() => {}));
    await settle();
    let answered: unknown;
    engine
      .execute(request, () => 'duplicate')
      .then(
        () => (answered = 'ran'),
        (error: unknown) => (answered = error),
      );
    await settle();
    wallStepMs = -HOUR_MS;
    for (let waited = 0; waited < 1_100 && answered === undefined; waited += 100) {
      time.advance(100);
      await settle();
    }
    expect((answered as { code?: string } | undefined)?.code).toBe('REQUEST_IN_PROGRESS');
  });
});
