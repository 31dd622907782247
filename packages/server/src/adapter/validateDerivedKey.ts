import { InvalidKeyError, isInvalidKeyError, validateKey } from '@idem/core';

/**
 * A key that the app's `key()` option derived (from the input, the body, the context),
 * validated like a key sent by a client, with a message that says where it came from:
 * the app's code, not the client, has to change.
 */
export function validateDerivedKey(derived: string, where: string): string {
  try {
    return validateKey(derived);
  } catch (error) {
    if (!isInvalidKeyError(error)) throw error;
    throw new InvalidKeyError(
      error.reason,
      `The key that key() derived ${where} is not valid: ${error.message}`,
      { cause: error },
    );
  }
}
