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
  return sha256Hex(canonicalJson(value));
}

const encoder = new TextEncoder();

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text`, with Web Crypto (Node ≥ 20, browsers). */
export async function sha256Hex(text: string): Promise<string> {
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
