// What the engine's tests (src/createIdempotency.*.test.ts) share. Kept out of src: it is
// test code, and nothing under src that is not a test may be weight a package ships unused.
import { createIdempotency } from '../src/createIdempotency.js';
import type { ExecuteRequest, Idempotency } from '../src/Idempotency.js';
import type { IdempotencyEvent, IdempotencyOptions } from '../src/IdempotencyOptions.js';
import type { IdempotencyStore } from '../src/store/IdempotencyStore.js';
import { manualClock } from '../src/testing/manualClock.js';
import { memoryStore } from '../src/testing/memoryStore.js';

export const LEASE_MS = 3_000;

/**
 * A precomputed fingerprint keeps Web Crypto (which answers on another thread) out of the
 * concurrency tests, so `settle()` reliably lets every started request reach its handler.
 */
export const request = { scope: 'user:1/orders.create', key: 'k-1', fingerprint: 'fp-tea-2' };

/**
 * An engine on a manual clock and a memory store, with a `LEASE_MS` lease and a minute's
 * TTL, its events collected; `options` change any of it.
 */
export function setup(options: Partial<IdempotencyOptions> = {}) {
  const clock = manualClock();
  const store = memoryStore({ clock });
  const events: IdempotencyEvent[] = [];
  const engine = createIdempotency({
    store,
    clock,
    leaseMs: LEASE_MS,
    ttlMs: 60_000,
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { clock, store, engine, events };
}

/** Lets pending callbacks (Web Crypto digests included) run without moving the clock. */
export const settle = async (rounds = 10) => {
  for (let index = 0; index < rounds; index++) {
    await new Promise((resolve) => setImmediate(resolve));
  }
};

/** What `promise` rejects with; an error when it fulfils. */
export const rejection = async (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

/** A store whose calls can be made to hang, as if the process holding them froze or died. */
export function freezable(store: IdempotencyStore) {
  let frozen = false;
  const hang = new Promise<never>(() => {});
  const proxy = new Proxy(store, {
    get(target, property: keyof IdempotencyStore) {
      const method = target[property] as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => (frozen ? hang : method.apply(target, args));
    },
  });
  return { store: proxy, freeze: () => (frozen = true), frozen: () => frozen };
}

/** A promise and the function that fulfils it. */
export function deferred<T>() {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((fulfil) => {
    resolve = fulfil;
  });
  return { promise, resolve };
}

/**
 * Starts `request` with a handler that runs until `finish(value)`, and lets it reach the
 * handler: the key stays claimed meanwhile.
 */
export async function startRunning(engine: Idempotency, request: ExecuteRequest) {
  const gate = deferred<string>();
  const first = engine.execute(request, () => gate.promise);
  await settle();
  return { first, finish: gate.resolve };
}
