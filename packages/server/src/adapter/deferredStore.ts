import type { IdempotencyStore } from '@idem/core/store';

/**
 * A store reached through `resolve` on its first use: every call waits for it, and a
 * failed `resolve` is tried again on the next call rather than remembered.
 */
export function deferredStore(resolve: () => Promise<IdempotencyStore>): IdempotencyStore {
  let resolving: Promise<IdempotencyStore> | undefined;
  const store = () => {
    resolving ??= resolve().catch((error: unknown) => {
      resolving = undefined;
      throw error;
    });
    return resolving;
  };
  return {
    claim: async (request) => (await store()).claim(request),
    complete: async (token, outcome, ttlMs) => (await store()).complete(token, outcome, ttlMs),
    release: async (token) => (await store()).release(token),
    heartbeat: async (token, leaseMs) => (await store()).heartbeat(token, leaseMs),
    saveStep: async (token, name, value) => (await store()).saveStep(token, name, value),
    get: async (scope, key) => (await store()).get(scope, key),
    sweep: async (options) => (await store()).sweep(options),
  };
}
