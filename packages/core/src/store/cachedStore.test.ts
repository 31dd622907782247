import { describe, expect, it } from 'vitest';
import { thrown } from '../../test/thrown.js';
import { isConfigurationError } from '../errors/ConfigurationError.js';
import { storeContract } from '../testing/contract/storeContract.js';
import { manualClock } from '../testing/manualClock.js';
import { memoryStore } from '../testing/memoryStore.js';
import { cachedStore } from './cachedStore.js';
import type { IdempotencyStore } from './IdempotencyStore.js';
import type { ClaimRequest } from './record.js';
import { leaseTokenOf, type StoredOutcome } from './record.js';

storeContract('cachedStore over memoryStore', async (clock) => ({
  store: cachedStore(memoryStore({ clock }), { maxEntries: 100, clock }),
}));

const request = (key: string, fingerprint = 'fp-a'): ClaimRequest => ({
  scope: 'user:1/orders.create',
  key,
  fingerprint,
  leaseMs: 1_000,
  ttlMs: 60_000,
});
const outcome = (value: string): StoredOutcome => ({ kind: 'success', value: { value } });

/** A memory store that counts the claims that reached it, under a cache. */
function subject(maxEntries: number) {
  const clock = manualClock(Date.UTC(2026, 0, 1));
  const inner = memoryStore({ clock });
  let claims = 0;
  const counting: IdempotencyStore = {
    ...inner,
    claim: (claimRequest) => {
      claims++;
      return inner.claim(claimRequest);
    },
  };
  const store = cachedStore(counting, { maxEntries, clock });
  const complete = async (key: string) => {
    const claim = await store.claim(request(key));
    await store.complete(leaseTokenOf(claim.record), outcome(key), 60_000);
  };
  return { clock, store, complete, claims: () => claims };
}

describe('cachedStore', () => {
  it('answers a replay from memory once the store has answered it once', async () => {
    const { store, complete, claims } = subject(10);
    await complete('k');
    const fromStore = await store.claim(request('k'));
    expect(fromStore.status).toBe('replay');
    const reached = claims();
    const fromCache = await store.claim(request('k'));
    expect(claims()).toBe(reached);
    expect(fromCache).toEqual(fromStore);
  });

  it('answers mismatch from memory for another payload of a cached key', async () => {
    const { store, complete, claims } = subject(10);
    await complete('k');
    await store.claim(request('k'));
    const reached = claims();
    const mismatch = await store.claim(request('k', 'fp-b'));
    expect(mismatch.status).toBe('mismatch');
    expect(mismatch.record.fingerprint).toBe('fp-a');
    expect(claims()).toBe(reached);
  });

  it('never caches a key in progress: every claim of it reaches the store', async () => {
    const { store, claims } = subject(10);
    expect((await store.claim(request('busy'))).status).toBe('claimed');
    expect((await store.claim(request('busy'))).status).toBe('in_progress');
    expect((await store.claim(request('busy'))).status).toBe('in_progress');
    expect(claims()).toBe(3);
  });

  it('evicts the least recently used record past maxEntries', async () => {
    const { store, complete, claims } = subject(2);
    for (const key of ['a', 'b', 'c']) await complete(key);
    await store.claim(request('a')); // cached: a
    await store.claim(request('b')); // cached: a, b
    await store.claim(request('a')); // a hit: b is now the least recently used
    await store.claim(request('c')); // cached: a, c (b evicted)
    const reached = claims();
    await store.claim(request('a'));
    await store.claim(request('c'));
    expect(claims()).toBe(reached);
    expect((await store.claim(request('b'))).status).toBe('replay');
    expect(claims()).toBe(reached + 1);
  });

  it("stops serving a record at its expiresAt by the store's clock", async () => {
    const { clock, store, complete, claims } = subject(10);
    await complete('k');
    const replay = await store.claim(request('k'));
    clock.set(replay.record.expiresAt - 1);
    expect((await store.claim(request('k'))).status).toBe('replay');
    const reached = claims();
    clock.set(replay.record.expiresAt);
    const fresh = await store.claim(request('k'));
    expect(claims()).toBe(reached + 1);
    expect(fresh).toMatchObject({ status: 'claimed', takeover: false });
  });

  it('hands out copies: mutating an answer never changes the cached outcome', async () => {
    const { store, complete } = subject(10);
    await complete('k');
    const first = await store.claim(request('k'));
    (first.record.outcome as unknown as { value: { value: string } }).value.value = 'changed';
    const hit = await store.claim(request('k'));
    (hit.record.outcome as unknown as { value: { value: string } }).value.value = 'changed again';
    expect((await store.claim(request('k'))).record.outcome).toEqual(outcome('k'));
  });

  it('refuses a maxEntries that is not a positive integer', () => {
    for (const maxEntries of [0, -1, 1.5, Number.NaN]) {
      const refused = thrown(() => cachedStore(memoryStore(), { maxEntries }));
      expect(isConfigurationError(refused), String(maxEntries)).toBe(true);
    }
  });
});
