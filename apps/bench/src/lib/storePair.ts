import { randomUUID } from 'node:crypto';
import type { JsonValue } from '@idem/core';
import { type ClaimRequest, type IdempotencyStore, leaseTokenOf } from '@idem/core/store';

/**
 * One claim + complete pair through `store`, what the store scenarios time and count: a
 * claim of a new key (a random UUID) with `request`, then its completion with a small
 * success `value`, kept for `request.ttlMs`.
 */
export function claimCompletePair(
  store: IdempotencyStore,
  request: Omit<ClaimRequest, 'key'>,
  value: JsonValue = { orderId: 1 },
): () => Promise<void> {
  return async () => {
    const claim = await store.claim({ ...request, key: randomUUID() });
    if (claim.status !== 'claimed') throw new Error(`claim answered ${claim.status}`);
    await store.complete(leaseTokenOf(claim.record), { kind: 'success', value }, request.ttlMs);
  };
}
