import { type Clock, systemClock } from '../Clock.js';
import { requirePositive } from '../requirePositive.js';
import type { ClaimResult, IdempotencyStore } from './IdempotencyStore.js';
import type { ClaimRequest } from './record.js';
import { decideClaim, type IdempotencyRecord, isExpired } from './record.js';

export interface CachedStoreOptions {
  /**
   * The most completed records kept in this process; past it the least recently used goes.
   * Each entry holds a whole outcome: size it by your largest ones.
   * @default 1_000
   */
  maxEntries?: number;
  /**
   * Judges when a cached record expires (at its `expiresAt`). Pass the store's own clock
   * where it has one (`memoryStore({ clock })`); a database or Redis store judges by its
   * server's clock, and this one may differ from it by the skew between the machines.
   * @default systemClock
   */
  clock?: Clock;
}

/**
 * `store` with a bounded LRU cache of completed records in front of `claim`, for hot
 * replays: a key answered from the store as completed is then answered from memory (replay,
 * or mismatch for another payload) until it expires, with no round trip. Every other call,
 * and every claim of a key not cached, goes to the store as before.
 *
 * **Staleness.** Only completed records are cached, exactly as the store returned them. A
 * completed record never changes in the store (every write is fenced to an in-progress
 * record), so until its `expiresAt` the cached copy is the stored one, with two exceptions
 * this process cannot see: a record deleted before its expiry by hand (`DELETE`, `DEL`) or
 * lost by the store (a Redis failover), which this process keeps replaying until the entry
 * expires or is evicted while others run the key afresh; and the expiry edge itself, judged
 * by `clock`, which is off from the store's by the clock skew. A sweep deletes only expired
 * records, so it never removes one that is still served from here.
 */
export function cachedStore(
  store: IdempotencyStore,
  options: CachedStoreOptions = {},
): IdempotencyStore {
  const maxEntries = requirePositive('maxEntries', options.maxEntries ?? 1_000, {
    integer: true,
  });
  const clock = options.clock ?? systemClock;
  // A Map iterates in insertion order: re-inserting on every hit keeps the least recently
  // used first, where eviction takes it.
  const entries = new Map<string, IdempotencyRecord>();
  const id = (scope: string, key: string) => `${scope.length}:${scope}\u0000${key}`;

  const cachedAnswer = (recordId: string, request: ClaimRequest): ClaimResult | undefined => {
    const cached = entries.get(recordId);
    if (!cached) return undefined;
    entries.delete(recordId);
    const now = clock.now();
    if (isExpired(cached, now)) return undefined;
    entries.set(recordId, cached);
    const decision = decideClaim(cached, request, now);
    // A completed, live record answers replay or mismatch: nothing to write, nothing to run.
    if (decision.status !== 'replay' && decision.status !== 'mismatch') return undefined;
    return { status: decision.status, record: structuredClone(cached) };
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const recordId = id(request.scope, request.key);
      const hit = cachedAnswer(recordId, request);
      if (hit) return hit;
      const result = await store.claim(request);
      if (result.record.status === 'completed') {
        entries.delete(recordId);
        entries.set(recordId, structuredClone(result.record));
        for (const oldest of entries.keys()) {
          if (entries.size <= maxEntries) break;
          entries.delete(oldest);
        }
      }
      return result;
    },
    complete: (token, outcome, ttlMs) => store.complete(token, outcome, ttlMs),
    release: (token) => store.release(token),
    heartbeat: (token, leaseMs) => store.heartbeat(token, leaseMs),
    saveStep: (token, name, value) => store.saveStep(token, name, value),
    get: (scope, key) => store.get(scope, key),
    sweep: (sweepOptions) => store.sweep(sweepOptions),
  };
}
