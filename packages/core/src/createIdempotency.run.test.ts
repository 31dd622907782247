import { describe, expect, it } from 'vitest';
import { createIdempotency } from './createIdempotency.js';
import { isKeyMismatchError } from './errors/KeyMismatchError.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import { isRequestInProgressError } from './errors/RequestInProgressError.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import type { Attempt } from './Idempotency.js';
import type { IdempotencyEvent } from './IdempotencyOptions.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

/**
 * `run`: every ending of a keyed call comes back as a value, the handler's answer, a
 * replay, the handler's failure, idem's refusal, and only a broken store throws.
 */
function setup() {
  const clock = manualClock();
  const store = memoryStore({ clock });
  const events: IdempotencyEvent['type'][] = [];
  const engine = createIdempotency({
    store,
    clock,
    leaseMs: 3_000,
    ttlMs: 60_000,
    onEvent: (event) => events.push(event.type),
  });
  return { clock, store, engine, events };
}

const request = (key: string, fingerprint = 'fp-1') => ({ scope: 'user:1/pay', key, fingerprint });
const answer =
  <T>(value: T, extra: Partial<Extract<Attempt<T>, { ok: true }>> = {}) =>
  async (): Promise<Attempt<T>> => ({ ok: true, value, ...extra });

describe('run', () => {
  it('answers with the value the handler ran to, then replays what was stored', async () => {
    const { engine, events } = setup();
    const first = await engine.run(request('k'), answer({ charged: 500 }));
    expect(first).toEqual({ ok: true, replayed: false, value: { charged: 500 }, version: 1 });
    const again = await engine.run(request('k'), answer({ charged: 999 }));
    expect(again).toEqual({ ok: true, replayed: true, value: { charged: 500 }, version: 1 });
    expect(events).toEqual(['claimed', 'completed', 'replayed']);
  });

  it('stores `stored` in place of the answer when the two differ (a response and its stored form)', async () => {
    const { engine } = setup();
    const response = { body: 'the answer the client gets now', headers: ['set-cookie'] };
    const first = await engine.run(request('k'), answer(response, { stored: { body: 'kept' } }));
    expect(first).toMatchObject({ ok: true, replayed: false, value: response });
    expect(await engine.run(request('k'), answer(response))).toMatchObject({
      replayed: true,
      value: { body: 'kept' },
    });
  });

  it("keep: 'nothing' answers without storing and frees the key for a retry", async () => {
    const { engine, events } = setup();
    const busy = await engine.run(request('k'), answer({ status: 503 }, { keep: 'nothing' }));
    expect(busy).toEqual({ ok: true, replayed: false, value: { status: 503 }, version: 1 });
    const retry = await engine.run(request('k'), answer({ status: 201 }));
    expect(retry).toMatchObject({ ok: true, replayed: false, value: { status: 201 } });
    expect(events).toEqual(['claimed', 'released', 'takeover', 'completed']);
  });

  it('a failure is a value: stored ones replay as values too, released ones free the key', async () => {
    const { engine } = setup();
    const declined = Object.assign(new Error('card declined'), { status: 402 });
    const first = await engine.run(request('k'), async () => ({ ok: false, error: declined }));
    expect(first).toEqual({ ok: false, replayed: false, error: declined });
    const replay = await engine.run(request('k'), answer('not run'));
    expect(replay).toMatchObject({
      ok: false,
      replayed: true,
      error: { message: 'card declined' },
    });

    const timeout = new Error('upstream timed out');
    const thrown = await engine.run(request('t'), async () => {
      throw timeout;
    });
    expect(thrown).toEqual({ ok: false, replayed: false, error: timeout });
    expect(await engine.run(request('t'), answer('ran again'))).toMatchObject({
      ok: true,
      replayed: false,
      value: 'ran again',
    });
  });

  it("idem's refusals are values: another request's key, a busy key, a lost lease", async () => {
    const { clock, engine, store } = setup();
    await engine.run(request('k', 'fp-1'), answer(1));
    const mismatch = await engine.run(request('k', 'fp-2'), answer(2));
    expect(mismatch.ok === false && isKeyMismatchError(mismatch.error)).toBe(true);
    expect(mismatch.replayed).toBe(false);

    let release = () => {};
    const holding = engine.run(request('busy'), async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return { ok: true, value: 'late' };
    });
    await new Promise((resolve) => setImmediate(resolve));
    const busy = await engine.run(request('busy'), answer('dup'));
    expect(busy.ok === false && isRequestInProgressError(busy.error)).toBe(true);
    // The holder's process freezes past its lease (its heartbeats never arrive); another
    // attempt takes the key over.
    store.heartbeat = () => new Promise<never>(() => {});
    clock.advance(3_001);
    const takeover = await engine.run(request('busy'), answer('taken over'));
    expect(takeover).toMatchObject({ ok: true, value: 'taken over', version: 2 });
    release();
    const zombie = await holding;
    expect(zombie.ok === false && isLeaseLostError(zombie.error)).toBe(true);
  });

  it('a result the serializer refuses settles the key with UnserializableValueError, as a value', async () => {
    const { engine } = setup();
    const result = await engine.run(
      request('k'),
      answer(() => 'a function'),
    );
    expect(result.ok === false && isUnserializableValueError(result.error)).toBe(true);
    const replay = await engine.run(request('k'), answer('not run'));
    expect(replay).toMatchObject({ ok: false, replayed: true });
  });

  it('a store that fails is thrown: no caller expects it', async () => {
    const { engine, store } = setup();
    const broken = new Error('connection refused');
    store.complete = async () => {
      throw broken;
    };
    await expect(engine.run(request('k'), answer(1))).rejects.toBe(broken);
  });
});
