/**
 * A brand instead of `instanceof`: a bundler (Next.js, for one) can load two copies of
 * this package, and the error formatter of one must recognise the other's errors.
 */
const BRAND = Symbol.for('@idem/server/InputTooLargeError');

/**
 * The cause of the `PAYLOAD_TOO_LARGE` (413) that `idempotent()` answers for an input over
 * `maxInputBytes`: it tells `withIdempotencyErrorData` that idem refused the call (and not
 * the procedure), so that the answer carries `data.idempotency` and its documentation link.
 */
export class InputTooLargeError extends Error {
  readonly [BRAND] = true;
  readonly code = 'INPUT_TOO_LARGE';
  /** The limit the input went over, in UTF-8 bytes of its canonical JSON. */
  readonly maxInputBytes: number;

  constructor(message: string, maxInputBytes: number) {
    super(message);
    this.name = 'InputTooLargeError';
    this.maxInputBytes = maxInputBytes;
  }
}

export function isInputTooLargeError(error: unknown): error is InputTooLargeError {
  return (
    typeof error === 'object' &&
    error !== null &&
    (error as Record<symbol, unknown>)[BRAND] === true
  );
}
