import { KeyMismatchError } from './errors/KeyMismatchError.js';
import { RequestInProgressError } from './errors/RequestInProgressError.js';
import type { RunResult } from './Idempotency.js';
import type { IdempotencySettings } from './resolveSettings.js';
import type { ClaimResult } from './store/IdempotencyStore.js';

/** A claim that did not hand the key to the caller. */
export type UnclaimedClaim = Exclude<ClaimResult, { status: 'claimed' }>;

/** The answer to an unclaimed claim: a replay (of a value or a stored error), or a refusal. */
export type ClaimAnswer = Exclude<RunResult<never>, { replayed: false; ok: true }>;

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
 * gives the stored outcome (the value deserialized, or the stored error rebuilt by the
 * error policy and marked for `wasReplayed`); a mismatch is a `KeyMismatchError`; a live
 * holder a `RequestInProgressError`, telling the duplicate the lease left but at most
 * `inProgressRetryAfterMs`. `report` hears which it was first (for events).
 */
export function answerClaim(
  claim: UnclaimedClaim,
  settings: Pick<IdempotencySettings, 'serializer' | 'errorPolicy' | 'inProgressRetryAfterMs'>,
  report: (type: 'replayed' | 'mismatch' | 'in_progress') => void,
): ClaimAnswer {
  const { scope, key, version } = claim.record;
  switch (claim.status) {
    case 'mismatch':
      report('mismatch');
      return { ok: false, replayed: false, error: new KeyMismatchError(scope, key) };
    case 'in_progress':
      report('in_progress');
      return {
        ok: false,
        replayed: false,
        error: new RequestInProgressError(
          scope,
          key,
          Math.min(claim.retryAfterMs, settings.inProgressRetryAfterMs),
        ),
      };
    case 'replay': {
      report('replayed');
      const { outcome } = claim.record;
      if (outcome === null) {
        // A completed record always holds its outcome: a store that lost it is broken.
        throw new TypeError(`The completed record of key "${key}" holds no outcome.`);
      }
      if (outcome.kind === 'success') {
        return {
          ok: true,
          replayed: true,
          value: settings.serializer.deserialize(outcome.value),
          version,
        };
      }
      const error = settings.errorPolicy.fromStored(outcome.error, settings.serializer);
      if (typeof error === 'object' && error !== null) {
        Object.defineProperty(error, REPLAYED, { value: true, enumerable: false });
      }
      return { ok: false, replayed: true, error };
    }
  }
}
