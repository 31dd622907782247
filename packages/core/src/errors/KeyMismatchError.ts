import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/** The key was used before with a different request payload (HTTP 422). */
export class KeyMismatchError extends IdempotencyError {
  readonly scope: string;
  readonly key: string;

  constructor(scope: string, key: string, options?: IdempotencyErrorOptions) {
    super(
      'KEY_MISMATCH',
      `Idempotency key "${key}" was already used with a different request payload. ` +
        'Send a new key for a new request; reuse a key only to retry the identical request.',
      options,
    );
    this.name = 'KeyMismatchError';
    this.scope = scope;
    this.key = key;
  }
}

export const isKeyMismatchError = guardFor<KeyMismatchError>('KEY_MISMATCH');
