import {
  type IdempotencyErrorCode,
  isIdempotencyError,
  isInvalidKeyError,
  isLeaseLostError,
  isRequestInProgressError,
} from '@idem/core';

/**
 * `data.idempotency` of an error that idem itself raised: what a client needs to tell, for
 * instance, "this key is busy, retry in `retryAfterMs`" from the procedure's own CONFLICT.
 */
export interface IdempotencyErrorData {
  /**
   * `'REQUEST_IN_PROGRESS'` and `'LEASE_LOST'` (both 409) mean "retry the same call with
   * the same key later"; `'KEY_MISMATCH'` (422) and `'INVALID_KEY'` (400) mean "do not".
   */
  code: IdempotencyErrorCode;
  /** For the 409s: when a retry may succeed, in milliseconds (also sent as `Retry-After`). */
  retryAfterMs?: number;
  /** For `'INVALID_KEY'`: `'missing'`, `'empty'`, `'too_long'` or `'invalid_character'`. */
  reason?: string;
}

/**
 * Adds `data.idempotency` to a tRPC error shape when the error came from idem (its cause
 * is one of `@idem/core`'s errors), and leaves every other shape as it is. Use it in your
 * `errorFormatter`, after your own fields:
 *
 * ```ts
 * initTRPC.context<Context>().create({
 *   errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
 * });
 * ```
 */
export function withIdempotencyErrorData<TShape extends { data: object }>(
  shape: TShape,
  error: { cause?: unknown },
): TShape & { data: { idempotency?: IdempotencyErrorData } } {
  const cause = error.cause;
  if (!isIdempotencyError(cause)) return shape;
  const idempotency: IdempotencyErrorData = { code: cause.code };
  if (isRequestInProgressError(cause)) idempotency.retryAfterMs = cause.retryAfterMs;
  if (isLeaseLostError(cause)) idempotency.retryAfterMs = 0;
  if (isInvalidKeyError(cause)) idempotency.reason = cause.reason;
  return { ...shape, data: { ...shape.data, idempotency } };
}

/**
 * A ready `errorFormatter` for apps without one of their own:
 * `initTRPC.context<Context>().create({ errorFormatter: idempotencyErrorFormatter })`.
 */
export function idempotencyErrorFormatter<TShape extends { data: object }>(options: {
  shape: TShape;
  error: { cause?: unknown };
}): TShape & { data: { idempotency?: IdempotencyErrorData } } {
  return withIdempotencyErrorData(options.shape, options.error);
}
