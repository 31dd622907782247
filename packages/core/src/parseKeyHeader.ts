import { InvalidKeyError } from './errors/InvalidKeyError.js';
import { IDEMPOTENCY_KEY_HEADER } from './wireFormat.js';

const SPELLINGS =
  `Send one ${IDEMPOTENCY_KEY_HEADER} field, either as a Structured Field string ` +
  '("8e03978e-40d5-43e8-bc93-6894a57f9324") or bare (8e03978e-40d5-43e8-bc93-6894a57f9324), ' +
  'with a key that holds no comma.';

/** What a caller knows about the request's `Idempotency-Key` fields beyond their joined value. */
export interface KeyHeaderFields {
  /**
   * How many `Idempotency-Key` fields the request carried, where the server gives the raw
   * field list (node:http's `rawHeaders`); `undefined` where it only gives the joined value
   * (fetch's `Headers`, most frameworks).
   * @default undefined
   */
  fieldCount?: number | undefined;
}

/**
 * The key in an `Idempotency-Key` header value, unvalidated (pass it to `validateKey`).
 *
 * Two spellings name one key: the IETF draft's Structured Field string (RFC 8941 §3.3.3:
 * `"abc"`, with `\"` and `\\` the only escapes) and Stripe's bare form (`abc`). A request
 * with more than one `Idempotency-Key` field arrives as one value joined with commas
 * (fetch's `Headers` and Node both join repeated fields so), so a comma outside a quoted
 * string means several keys: which one would be the call's? It throws `InvalidKeyError`
 * (reason `'malformed_header'`), as does a quoted string that is not terminated, has
 * another escape, or is followed by anything but whitespace.
 *
 * A comma inside a quoted string is refused too unless `fieldCount` says the request had
 * one field: the fields `"a` and `b"` arrive joined as `"a, b"`, which reads as one quoted
 * key. The message never echoes the value.
 */
export function parseKeyHeader(value: string, fields: KeyHeaderFields = {}): string {
  const { fieldCount } = fields;
  if (fieldCount !== undefined && fieldCount > 1) throw manyFields();
  const text = value.trim();
  if (!text.startsWith('"')) {
    if (text.includes(',')) throw manyFields();
    return text;
  }
  let key = '';
  for (let index = 1; index < text.length; index++) {
    const char = text.charAt(index);
    if (char === '\\') {
      const escaped = text[index + 1];
      if (escaped !== '"' && escaped !== '\\') {
        throw malformed(
          `a backslash at index ${index} escapes neither " nor \\ (the only escapes of a Structured Field string)`,
        );
      }
      key += escaped;
      index++;
    } else if (char === '"') {
      const rest = text.slice(index + 1).trim();
      if (rest.startsWith(',')) throw manyFields();
      if (rest.length > 0) throw malformed('something follows the closing quote');
      if (fieldCount !== 1 && key.includes(',')) throw joinedLookalike();
      return key;
    } else {
      key += char;
    }
  }
  throw malformed('the quoted string has no closing quote');
}

function manyFields(): InvalidKeyError {
  return new InvalidKeyError(
    'malformed_header',
    `The request carries more than one ${IDEMPOTENCY_KEY_HEADER} (several fields, or a ` +
      `comma-separated list), so it names no single key. ${SPELLINGS}`,
  );
}

function joinedLookalike(): InvalidKeyError {
  return new InvalidKeyError(
    'malformed_header',
    `The ${IDEMPOTENCY_KEY_HEADER} holds a comma inside its quoted string, which this server ` +
      `cannot tell apart from two ${IDEMPOTENCY_KEY_HEADER} fields that HTTP joined with a ` +
      'comma (the fields "a and b" arrive as "a, b"). Use a key without a comma, such as ' +
      'crypto.randomUUID().',
  );
}

function malformed(what: string): InvalidKeyError {
  return new InvalidKeyError(
    'malformed_header',
    `${IDEMPOTENCY_KEY_HEADER} starts with a quote but is not a Structured Field string: ${what}. ${SPELLINGS}`,
  );
}

/**
 * The `Idempotency-Key` header value that `parseKeyHeader` reads back as `key`: the bare
 * form, which every server understands, unless the bare form would read differently (a
 * comma, a leading quote, or a space at either end, which header parsing trims); then
 * the Structured Field string, with `"` and `\\` escaped.
 */
export function formatKeyHeader(key: string): string {
  if (!/^[ "]|,| $/.test(key)) return key;
  return `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}
