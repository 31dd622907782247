import {
  type IdempotencyErrorCode,
  type IdempotencyStatus,
  isConfigurationError,
  isInvalidKeyError,
  isKeyMismatchError,
  isLeaseLostError,
  isRequestInProgressError,
  isUnserializableValueError,
} from '@idem/core';
import { isInputTooLargeError } from './InputTooLargeError.js';
import { isStoreFailedError } from './StoreFailedError.js';
import { UnstorableScopeError } from './storedScope.js';
import { STORE_FAILED_MESSAGE } from './storeFailedMessage.js';

/** The codes of idem's answers, in every adapter's error format. */
export type RefusalCode = IdempotencyErrorCode | 'INPUT_TOO_LARGE' | 'INVALID_BODY';

/**
 * How idem answers a request it did not run (or whose run it cannot hand back): one table
 * for every adapter, which writes it in its own format (a tRPC error with
 * `data.idempotency`, a problem+json document).
 */
export interface Refusal {
  /** The HTTP status. */
  status: 400 | 409 | 413 | 422 | 500;
  /** idem's code, which links to its documentation; none for a refusal without one. */
  code?: RefusalCode;
  message: string;
  /** For `INVALID_KEY`: why (`'missing'`, `'empty'`, `'too_long'`, …). */
  reason?: string;
  /** For the 409s: when a retry may succeed, in milliseconds (also `Retry-After`). */
  retryAfterMs?: number;
  /** For the 409s: the `Idempotency-Status` header's value. */
  idempotencyStatus?: IdempotencyStatus;
  /** For `INPUT_TOO_LARGE`: the limit, in bytes. */
  limitBytes?: number;
}

/**
 * The refusal for an error idem raised, or `undefined` for any other error (the handler's
 * own, or a store's: the caller decides). A bad key or a principal the store cannot keep is
 * the request's fault (400); a key used with another request 422; a busy key or a lost
 * lease a conflict to retry (409); an input over the limit 413; a result that could not be
 * stored, options that cannot work (idem's tables missing among them), or a store that
 * failed, the server's (500).
 */
export function refusalOf(error: unknown): Refusal | undefined {
  if (isInvalidKeyError(error)) {
    return { status: 400, code: 'INVALID_KEY', message: error.message, reason: error.reason };
  }
  if (isKeyMismatchError(error)) {
    return { status: 422, code: 'KEY_MISMATCH', message: error.message };
  }
  if (isRequestInProgressError(error)) {
    return {
      status: 409,
      code: 'REQUEST_IN_PROGRESS',
      message: error.message,
      retryAfterMs: error.retryAfterMs,
      idempotencyStatus: 'in-progress',
    };
  }
  if (isLeaseLostError(error)) {
    // Another attempt owns the key now and will finish it: a retry with the same key gets
    // its answer, so this is a conflict to retry, not a server fault.
    return {
      status: 409,
      code: 'LEASE_LOST',
      message: error.message,
      retryAfterMs: 0,
      idempotencyStatus: 'lease-lost',
    };
  }
  if (isInputTooLargeError(error)) {
    const { message, maxInputBytes } = error;
    return { status: 413, code: 'INPUT_TOO_LARGE', message, limitBytes: maxInputBytes };
  }
  if (error instanceof UnstorableScopeError) return { status: 400, message: error.message };
  if (isUnserializableValueError(error)) {
    return { status: 500, code: 'UNSERIALIZABLE_VALUE', message: error.message };
  }
  if (isConfigurationError(error)) {
    return { status: 500, code: 'INVALID_CONFIGURATION', message: error.message };
  }
  if (isStoreFailedError(error)) return STORE_FAILED;
  return undefined;
}

/**
 * The refusal when the store itself failed (a lost connection, a refused statement): the
 * store's message may hold SQL text and values, which an answer must never show.
 */
export const STORE_FAILED: Refusal = {
  status: 500,
  code: 'STORE_FAILED',
  message: STORE_FAILED_MESSAGE,
};

/**
 * A request whose input cannot be fingerprinted (nested too deep): the request's fault,
 * answered 400 before anything is stored, unlike a result that cannot be stored (500).
 */
export function unfingerprintable(message: string): Refusal {
  return { status: 400, code: 'UNSERIALIZABLE_VALUE', message };
}
