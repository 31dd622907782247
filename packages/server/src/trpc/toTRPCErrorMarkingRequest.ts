import {
  isConfigurationError,
  isInvalidKeyError,
  isKeyMismatchError,
  isLeaseLostError,
  isRequestInProgressError,
  isUnserializableValueError,
} from '@idem/core';
import { TRPCError } from '@trpc/server';
import { STORE_FAILED_MESSAGE } from '../storeFailedMessage.js';
import type { IdempotencyRequest } from './idempotencyContext.js';

/**
 * The tRPC error to throw for an error idem raised (with the idem error as `cause`, so that
 * `withIdempotencyErrorData` can describe it); a busy key also marks the request
 * (`markBusy`: `Retry-After` and `Idempotency-Status` on the response).
 * A `TRPCError` is returned as it is; any other error (the store's) becomes an
 * `INTERNAL_SERVER_ERROR` whose message says nothing of the store's internals.
 */
export function toTRPCErrorMarkingRequest(
  error: unknown,
  request: IdempotencyRequest,
  batchIndex: number,
): unknown {
  if (isInvalidKeyError(error)) {
    return new TRPCError({ code: 'BAD_REQUEST', message: error.message, cause: error });
  }
  if (isKeyMismatchError(error)) {
    return new TRPCError({ code: 'UNPROCESSABLE_CONTENT', message: error.message, cause: error });
  }
  if (isRequestInProgressError(error)) {
    request.markBusy(batchIndex, 'in-progress', error.retryAfterMs);
    return new TRPCError({ code: 'CONFLICT', message: error.message, cause: error });
  }
  if (isLeaseLostError(error)) {
    // Another attempt owns the key now and will finish it: a retry with the same key gets
    // its answer (or waits for it), so this is a conflict to retry, not a server fault.
    request.markBusy(batchIndex, 'lease-lost', 0);
    return new TRPCError({ code: 'CONFLICT', message: error.message, cause: error });
  }
  if (isConfigurationError(error) || isUnserializableValueError(error)) {
    return new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: error.message, cause: error });
  }
  if (isTRPCErrorLike(error)) return error;
  // Anything else came from the store (a lost connection, a refused statement): its message
  // may hold SQL text and values, which a response must never show. It stays the `cause`,
  // for the server's logs and `onError`.
  return new TRPCError({
    code: 'INTERNAL_SERVER_ERROR',
    message: STORE_FAILED_MESSAGE,
    cause: error,
  });
}

/** By shape, not `instanceof`: a bundler may load two copies of `@trpc/server`. */
function isTRPCErrorLike(error: unknown): boolean {
  return error instanceof Error && error.name === 'TRPCError';
}
