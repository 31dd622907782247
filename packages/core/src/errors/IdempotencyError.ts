/**
 * Every error that idem itself raises carries one of these codes. They are stable:
 * clients and logs may match on them.
 */
export type IdempotencyErrorCode =
  | 'INVALID_KEY'
  | 'KEY_MISMATCH'
  | 'REQUEST_IN_PROGRESS'
  | 'LEASE_LOST'
  | 'INVALID_CONFIGURATION'
  | 'UNSERIALIZABLE_VALUE'
  | 'INVALID_EVENT'
  | 'INPUT_TOO_LARGE'
  | 'RETRY_BUDGET_EXHAUSTED'
  | 'STORE_FAILED';

/**
 * A brand instead of `instanceof`: a bundler (Next.js, for one) can load two copies of
 * this package, and an error made by one copy must still be recognised by the other.
 */
const BRAND = Symbol.for('@idem/core/IdempotencyError');

export interface IdempotencyErrorOptions {
  cause?: unknown;
}

/** The base of idem's error family. Check with `isIdempotencyError`, not `instanceof`. */
export class IdempotencyError extends Error {
  readonly [BRAND] = true;
  readonly code: IdempotencyErrorCode;

  constructor(code: IdempotencyErrorCode, message: string, options: IdempotencyErrorOptions = {}) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.name = 'IdempotencyError';
    this.code = code;
  }
}

export function isIdempotencyError(error: unknown): error is IdempotencyError {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[BRAND] === true
  );
}

/** Builds a guard that recognises one member of the family by brand and code. */
export function guardFor<T extends IdempotencyError>(
  code: IdempotencyErrorCode,
): (error: unknown) => error is T {
  return (error: unknown): error is T => isIdempotencyError(error) && error.code === code;
}
