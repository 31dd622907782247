import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/**
 * The idempotency key is missing, empty, too long, holds characters outside printable
 * ASCII, or came in a key header that does not follow the wire format.
 */
export class InvalidKeyError extends IdempotencyError {
  /** Why the key was refused, e.g. `'empty'` or `'too_long'`. */
  readonly reason: 'missing' | 'empty' | 'too_long' | 'invalid_character' | 'malformed_header';

  constructor(
    reason: InvalidKeyError['reason'],
    message: string,
    options?: IdempotencyErrorOptions,
  ) {
    super('INVALID_KEY', message, options);
    this.name = 'InvalidKeyError';
    this.reason = reason;
  }
}

export const isInvalidKeyError = guardFor<InvalidKeyError>('INVALID_KEY');
