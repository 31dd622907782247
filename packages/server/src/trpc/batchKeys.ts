import { IDEMPOTENCY_KEY_BATCH_HEADER, InvalidKeyError } from '@idem/core';
import type { KeyHeaderFields } from '@idem/core/store';

const BATCH_INDEX = /^(0|[1-9][0-9]{0,8})$/;

const FORMAT =
  `${IDEMPOTENCY_KEY_BATCH_HEADER} must be a JSON object from each keyed operation's batch ` +
  'index to its key, e.g. {"0":"<key>","2":"<key>"}';

/**
 * Parses the `Idempotency-Key-Batch` header into batch index → key. Keys are returned as
 * sent (strings); each is validated when its operation runs, so one bad key fails only
 * its own operation. A header that is not that JSON shape throws `InvalidKeyError` (reason
 * `malformed_header`; a 400 with `INVALID_KEY` through the middleware) for every keyed
 * operation of the batch: none of its keys can be trusted.
 */
export function batchKeys(
  header: string,
  fields: KeyHeaderFields = {},
): ReadonlyMap<number, string> {
  const { fieldCount } = fields;
  if (fieldCount !== undefined && fieldCount > 1) throw severalFields();
  let parsed: unknown;
  try {
    parsed = JSON.parse(header);
  } catch (cause) {
    // Repeated fields arrive joined with commas: `{"0":"a"}, {"1":"b"}`.
    if (/\}\s*,\s*\{/.test(header)) throw severalFields();
    throw new InvalidKeyError('malformed_header', `${FORMAT}; it is not valid JSON.`, { cause });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidKeyError('malformed_header', `${FORMAT}; got a JSON ${kind(parsed)}.`);
  }
  const keys = new Map<number, string>();
  for (const [index, key] of Object.entries(parsed)) {
    // Never echo the member name: it is untrusted text headed for an error message.
    if (!BATCH_INDEX.test(index)) {
      throw new InvalidKeyError(
        'malformed_header',
        `${FORMAT}; a member name is not a batch index (a non-negative decimal integer).`,
      );
    }
    if (typeof key !== 'string') {
      throw new InvalidKeyError(
        'malformed_header',
        `${FORMAT}; the key for batch index ${index} is a JSON ${kind(key)}, not a string.`,
      );
    }
    // The fields {"0":"a and b"} arrive joined as {"0":"a, b"}: without the raw field
    // list, a key with a comma cannot be told from that.
    if (fieldCount !== 1 && key.includes(',')) {
      throw new InvalidKeyError(
        'malformed_header',
        `The key for batch index ${index} holds a comma, which this server cannot tell apart ` +
          `from two ${IDEMPOTENCY_KEY_BATCH_HEADER} fields that HTTP joined with a comma. Use ` +
          'keys without a comma, such as crypto.randomUUID().',
      );
    }
    keys.set(Number(index), key);
  }
  return keys;
}

function severalFields(): InvalidKeyError {
  return new InvalidKeyError(
    'malformed_header',
    `The request carries more than one ${IDEMPOTENCY_KEY_BATCH_HEADER} field; send one, ` +
      'holding the keys of every keyed operation of the batch.',
  );
}

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
