/**
 * Where idem's error answers link by default (the IETF idempotency draft asks error
 * answers to carry a link to their documentation): this package's README, whose section
 * "Error codes" has a heading per code (`#invalid_key`, `#key_mismatch`, …).
 */
export const DEFAULT_ERROR_DOCS_URL = 'https://www.npmjs.com/package/@idem/server';

/**
 * The link that documents `code`: `<docsUrl>#<code in lower case>`. tRPC errors carry it
 * in `data.idempotency.type`, the Fetch handler's problem documents in `type`.
 */
export function errorTypeUrl(docsUrl: string, code: string): string {
  return `${docsUrl}#${code.toLowerCase()}`;
}
