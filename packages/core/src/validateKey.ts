import { InvalidKeyError } from './errors/InvalidKeyError.js';

/** The longest idempotency key accepted, in characters (IETF draft and Stripe allow 255). */
export const MAX_KEY_LENGTH = 255;

const RULE = `Idempotency key must be 1–${MAX_KEY_LENGTH} printable ASCII characters (0x20–0x7E)`;
const ADVICE = 'Use a UUID (crypto.randomUUID()).';

/**
 * Returns `key` if it is a valid idempotency key: a string of 1–255 printable ASCII
 * characters (0x20–0x7E). Otherwise throws `InvalidKeyError` whose `reason` is
 * `'missing'` (not a string), `'empty'`, `'too_long'` or `'invalid_character'`.
 *
 * Printable ASCII only, because the key travels in an HTTP header: a CR or LF could
 * inject headers, and other bytes are mangled by proxies. The message never echoes the
 * key's characters, only their code points.
 */
export function validateKey(key: unknown): string {
  if (typeof key !== 'string') {
    throw new InvalidKeyError('missing', `${RULE}; got ${describe(key)}. ${ADVICE}`);
  }
  if (key.length === 0) {
    throw new InvalidKeyError('empty', `${RULE}; got an empty string. ${ADVICE}`);
  }
  for (let index = 0; index < key.length; index++) {
    const unit = key.charCodeAt(index);
    if (unit < 0x20 || unit > 0x7e) {
      // codePointAt names an emoji as U+1F600 rather than as half of a surrogate pair.
      const codePoint = key.codePointAt(index) ?? unit;
      const kind =
        unit < 0x20 || (unit >= 0x7f && unit <= 0x9f) ? 'control character' : 'non-ASCII character';
      throw new InvalidKeyError(
        'invalid_character',
        `${RULE}; got the ${kind} ${formatCodePoint(codePoint)} at index ${index}. ${ADVICE}`,
      );
    }
  }
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidKeyError('too_long', `${RULE}; got ${key.length} characters. ${ADVICE}`);
  }
  return key;
}

function describe(value: unknown): string {
  if (value === undefined) return 'no key (undefined)';
  if (value === null) return 'null';
  return `a value of type ${typeof value}`;
}

function formatCodePoint(codePoint: number): string {
  return `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;
}
