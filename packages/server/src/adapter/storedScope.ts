import { ConfigurationError } from '@idem/core';

/** The longest stored scope (principal and path), in UTF-8 bytes. */
export const MAX_SCOPE_BYTES = 2_048;
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const encoder = new TextEncoder();

/**
 * A principal the idempotency store cannot keep: the request is what is wrong, so an
 * adapter answers it with a 400 before anything is stored.
 */
export class UnstorablePrincipalError extends Error {
  override readonly name = 'UnstorablePrincipalError';
}

/**
 * The scope a key is stored under: the principal `scope()` named, then what is being
 * called (a tRPC path, or an HTTP method and route). A `/` (and `%`) in the principal is
 * percent-encoded, so that ("a/b", "c") and ("a", "b/c") stay two scopes.
 *
 * Throws `ConfigurationError` when `scope()` returned no principal (the server's bug), and
 * `UnstorablePrincipalError` for a principal Postgres cannot store as given: it refuses
 * U+0000 in text, would store an unpaired surrogate as U+FFFD (two principals would
 * meet), and a btree entry holds ~2.7 kB. Neither message shows the principal.
 */
export function storedScope(principal: unknown, path: string, factory: string): string {
  if (typeof principal !== 'string' || principal.length === 0) {
    throw new ConfigurationError(
      `${factory}: scope() returned ${typeof principal === 'string' ? 'an empty string' : String(principal)} ` +
        `for "${path}"; it must return a non-empty string naming the caller (tenant/user).`,
    );
  }
  const scope = `${principal.replaceAll('%', '%25').replaceAll('/', '%2F')}/${path}`;
  const problem = principal.includes('\u0000')
    ? 'contains U+0000'
    : UNPAIRED_SURROGATE.test(principal)
      ? 'contains an unpaired UTF-16 surrogate'
      : scope.length * 3 > MAX_SCOPE_BYTES && encoder.encode(scope).length > MAX_SCOPE_BYTES
        ? `makes a scope longer than ${MAX_SCOPE_BYTES} bytes`
        : undefined;
  if (problem !== undefined) {
    throw new UnstorablePrincipalError(
      `The principal that scope() named for "${path}" ${problem}, which the idempotency ` +
        'store cannot keep; the call was not run. Name callers with printable text (an id).',
    );
  }
  return scope;
}
