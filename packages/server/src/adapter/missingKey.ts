import { IDEMPOTENCY_KEY_HEADER, InvalidKeyError } from '@idem/core';

/**
 * The error for a request that needs a key and sent none (400 `INVALID_KEY`, reason
 * `missing`): where the key goes (`where`, after the header's name), and what a key is.
 */
export function missingKey(what: string, where = ''): InvalidKeyError {
  return new InvalidKeyError(
    'missing',
    `This ${what} requires an idempotency key: send it in the ${IDEMPOTENCY_KEY_HEADER} ` +
      `header${where}, 1–255 printable ASCII characters (0x20–0x7E), e.g. ` +
      `crypto.randomUUID(), the same on every retry of the ${what}.`,
  );
}
