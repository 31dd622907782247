import type { ClaimResult } from './IdempotencyStore.js';
import { type ClaimRequest, decideClaim } from './record.js';

/**
 * The answer to a claim that wrote a new record for a key that had none, at the store's
 * `now`: the record core's claim table makes of it (version 1, one attempt, no steps). For
 * a store whose insert sends the row back only as its time.
 */
export function claimedNew(request: ClaimRequest, now: number): ClaimResult {
  const claimed = decideClaim(null, request, now);
  if (claimed.status !== 'claimed') {
    throw new Error('decideClaim refused a key that does not exist');
  }
  return { status: 'claimed', takeover: false, record: claimed.next };
}
