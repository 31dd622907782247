import { KeyMismatchError } from './errors/KeyMismatchError.js';
import { RequestInProgressError } from './errors/RequestInProgressError.js';
import type { ClaimResult } from './IdempotencyStore.js';
import type { IdempotencySettings } from './resolveSettings.js';

/** A claim that did not hand the key to the caller. */
export type UnclaimedClaim = Exclude<ClaimResult, { status: 'claimed' }>;

/** What a replay hands back: the stored success value, or the stored error rebuilt. */
export type ReplayedOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

const REPLAYED = Symbol.for('@idem/core/replayed');

/** True for an error that a replay threw: the stored outcome of an earlier attempt. */
export function wasReplayed(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[REPLAYED] === true
  );
}

/**
 * The one answer to a claim that did not hand over the key, whatever the mode: a replay
 * returns the stored outcome (the value deserialized, or the stored error rebuilt by the
 * error policy and marked for `wasReplayed`); a mismatch throws `KeyMismatchError`; a live
 * holder throws `RequestInProgressError`, telling the duplicate the lease left but at most
 * `inProgressRetryAfterMs`. `report` hears which it was first (for events).
 */
export function answerClaim(
  claim: UnclaimedClaim,
  settings: Pick<IdempotencySettings, 'serializer' | 'errorPolicy' | 'inProgressRetryAfterMs'>,
  report: (type: 'replayed' | 'mismatch' | 'in_progress') => void,
): ReplayedOutcome {
  const { scope, key } = claim.record;
  switch (claim.status) {
    case 'mismatch':
      report('mismatch');
      throw new KeyMismatchError(scope, key);
    case 'in_progress':
      report('in_progress');
      throw new RequestInProgressError(
        scope,
        key,
        Math.min(claim.retryAfterMs, settings.inProgressRetryAfterMs),
      );
    case 'replay': {
      report('replayed');
      const outcome = claim.record.outcome!;
      if (outcome.kind === 'success') {
        return { ok: true, value: settings.serializer.deserialize(outcome.value) };
      }
      const error = settings.errorPolicy.fromStored(outcome.error, settings.serializer);
      if (typeof error === 'object' && error !== null) {
        Object.defineProperty(error, REPLAYED, { value: true, enumerable: false });
      }
      return { ok: false, error };
    }
  }
}
