import type { IdempotencyStore } from '@idem/core/store';
import { getRuntime } from './runtime';

/**
 * The runtime's idempotency store (`drizzleStore` on the app's database), reached once the
 * runtime has started: route modules build their idem wrappers when they load, before the
 * database is open.
 */
export const runtimeStore: IdempotencyStore = {
  claim: async (request) => (await getRuntime()).store.claim(request),
  complete: async (token, outcome, ttlMs) =>
    (await getRuntime()).store.complete(token, outcome, ttlMs),
  release: async (token) => (await getRuntime()).store.release(token),
  heartbeat: async (token, leaseMs) => (await getRuntime()).store.heartbeat(token, leaseMs),
  saveStep: async (token, name, value) => (await getRuntime()).store.saveStep(token, name, value),
  get: async (scope, key) => (await getRuntime()).store.get(scope, key),
  sweep: async (options) => (await getRuntime()).store.sweep(options),
};
