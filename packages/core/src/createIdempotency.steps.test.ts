import { describe, expect, it } from 'vitest';
import { createIdempotency } from './createIdempotency.js';
import type { IdempotencyEvent } from './IdempotencyOptions.js';
import type { IdempotencyStore } from './store/IdempotencyStore.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

/**
 * A recovery point the store cannot save (its database went away) ends the attempt as the
 * store's failure: `run` and `execute` reject with the store's error, as for a claim or a
 * completion that fails, and the key stays claimed for a retry to take over. Nothing with
 * the store's words in it is stored or released as the handler's outcome.
 */
function setup() {
  const clock = manualClock();
  const store = memoryStore({ clock });
  const lost = new Error('Failed query: update "idem_keys" set "steps" = …', {
    cause: Object.assign(new Error('connection terminated'), { code: '57P01' }),
  });
  let failSaves = true;
  const failing: IdempotencyStore = {
    ...store,
    claim: (request) => store.claim(request),
    complete: (token, outcome, ttlMs) => store.complete(token, outcome, ttlMs),
    release: (token) => store.release(token),
    heartbeat: (token, leaseMs) => store.heartbeat(token, leaseMs),
    get: (scope, key) => store.get(scope, key),
    saveStep: (token, name, value) =>
      failSaves ? Promise.reject(lost) : store.saveStep(token, name, value),
  };
  const events: IdempotencyEvent['type'][] = [];
  const engine = createIdempotency({
    store: failing,
    clock,
    leaseMs: 3_000,
    ttlMs: 60_000,
    onEvent: (event) => events.push(event.type),
  });
  return { clock, store, engine, events, lost, heal: () => (failSaves = false) };
}

const call = { scope: 'user:1/pay', key: 'k', fingerprint: 'fp-1' };

describe('a recovery point the store cannot save', () => {
  it('rejects with the store’s error; the key stays claimed, and a retry after the lease takes it over', async () => {
    const { clock, store, engine, events, lost, heal } = setup();
    let charges = 0;
    const pay = () =>
      engine.execute(call, async ({ step }) => {
        const charge = await step('charge', () => ({ id: `ch_${++charges}` }));
        return { paid: charge.id };
      });
    await expect(pay()).rejects.toBe(lost);
    expect(events).not.toContain('released');
    expect(events).not.toContain('completed');
    expect(await store.get(call.scope, call.key)).toMatchObject({ status: 'in_progress' });
    heal();
    clock.advance(3_000);
    expect(await pay()).toMatchObject({ replayed: false, value: { paid: 'ch_2' } });
    expect(charges).toBe(2);
  });

  it('is the store’s failure however the adapter wrapped it, and the handler’s answer when it caught it', async () => {
    const { engine, lost } = setup();
    const wrapped = await engine
      .run({ ...call, key: 'wrapped' }, async ({ step }) => {
        try {
          await step('charge', () => 'ch_1');
          return { ok: true, value: 'unreachable' };
        } catch (error) {
          return { ok: false, error: new Error('INTERNAL_SERVER_ERROR', { cause: error }) };
        }
      })
      .catch((error: unknown) => error);
    expect(wrapped).toBe(lost);
    const caught = await engine.run({ ...call, key: 'caught' }, async ({ step }) => {
      const charge = await step('charge', () => 'ch_1').catch(() => 'unsaved');
      return { ok: true, value: charge };
    });
    expect(caught).toEqual({ ok: true, replayed: false, value: 'unsaved', version: 1 });
  });
});
