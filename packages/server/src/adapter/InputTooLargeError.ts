import { IdempotencyError } from '@idem/core';
import { guardFor } from '@idem/core/store';

/**
 * The cause of the `PAYLOAD_TOO_LARGE` (413) that `idempotent()` answers for an input over
 * `maxInputBytes`: a member of `@idem/core`'s error family (code `INPUT_TOO_LARGE`), which
 * tells `withIdempotencyErrorData` that idem refused the call (and not the procedure), so
 * that the answer carries `data.idempotency` and its documentation link.
 */
export class InputTooLargeError extends IdempotencyError {
  /** The limit the input went over, in UTF-8 bytes of its canonical JSON. */
  readonly maxInputBytes: number;

  constructor(message: string, maxInputBytes: number) {
    super('INPUT_TOO_LARGE', message);
    this.name = 'InputTooLargeError';
    this.maxInputBytes = maxInputBytes;
  }
}

/** Recognises an `InputTooLargeError` by brand and code, even from another copy of idem. */
export const isInputTooLargeError = guardFor<InputTooLargeError>('INPUT_TOO_LARGE');
