import { builtinSha256Hex } from './builtinCrypto.js';
import { canonicalJson } from './canonicalJson.js';
import { ConfigurationError } from './errors/ConfigurationError.js';

/**
 * The fingerprint of a request: lowercase hex SHA-256 of the UTF-8 bytes of
 * `canonicalJson(value)`. Equal values (key order aside) give equal fingerprints; a
 * different value gives a different one. Throws `UnserializableValueError` for a cycle.
 *
 * @example
 * ```ts
 * await fingerprint({ path: 'order.create', input: { sku: 'A1', qty: 2 } });
 * // same as fingerprint({ input: { qty: 2, sku: 'A1' }, path: 'order.create' })
 * ```
 */
export async function fingerprint(value: unknown): Promise<string> {
  return fingerprintNow(value);
}

/**
 * `fingerprint(value)`, synchronously where the runtime has `node:crypto`: a string there,
 * a promise (Web Crypto) elsewhere. For the engine's hot path, which should not pay a
 * promise for a hash it can have at once.
 */
export function fingerprintNow(value: unknown): string | Promise<string> {
  return sha256HexNow(canonicalJson(value));
}

/**
 * Lowercase hex SHA-256 of the UTF-8 bytes of `text`: `node:crypto` where the runtime has
 * it, Web Crypto elsewhere (browsers, edge runtimes).
 */
export async function sha256Hex(text: string): Promise<string> {
  return sha256HexNow(text);
}

/** `sha256Hex`, a string at once where `node:crypto` exists, else a promise. */
export function sha256HexNow(text: string): string | Promise<string> {
  return builtinSha256Hex ? builtinSha256Hex(text) : webCryptoSha256Hex(text);
}

const encoder = new TextEncoder();

/** SHA-256 with Web Crypto (browsers, edge runtimes, Node without `getBuiltinModule`). */
export async function webCryptoSha256Hex(text: string): Promise<string> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    throw new ConfigurationError(
      'Web Crypto (globalThis.crypto.subtle) is not available, so idem cannot compute ' +
        'SHA-256. Run on Node.js 20 or later, or in a browser on a secure context (https or ' +
        'localhost): browsers hide crypto.subtle on plain http.',
    );
  }
  const digest = await subtle.digest('SHA-256', encoder.encode(text));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}
