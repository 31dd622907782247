/**
 * Where idem's error answers link by default (the IETF idempotency draft asks error
 * answers to carry a link to their documentation): the documentation site's page of error
 * codes, which has a heading per code (`#invalid_key`, `#key_mismatch`, …). The site's
 * build checks that every code's link lands on its heading.
 */
export const DEFAULT_ERROR_DOCS_URL = 'https://idem-js.github.io/idem/guide/errors';

/**
 * The link that documents `code`: `<docsUrl>#<code in lower case>`. tRPC errors carry it
 * in `data.idempotency.type`, the Fetch handler's problem documents in `type`.
 */
export function errorTypeUrl(docsUrl: string, code: string): string {
  return `${docsUrl}#${code.toLowerCase()}`;
}
