import { ConfigurationError } from '@idem/core';

/** The longest stored scope (principal and path), in UTF-8 bytes. */
export const MAX_SCOPE_BYTES = 2_048;
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const encoder = new TextEncoder();

/**
 * A scope the idempotency store cannot keep (its principal, or a route too long): the
 * request is what is wrong, so an adapter answers it with a 400 before anything is stored.
 */
export class UnstorableScopeError extends Error {
  override readonly name = 'UnstorableScopeError';
}

/** The longest route a refusal quotes. */
const SHOWN_ROUTE = 120;

/**
 * The scope a key is stored under: the principal `scope()` named, then what is being
 * called (a tRPC path, or an HTTP method and route). A `/` (and `%`) in the principal is
 * percent-encoded, so that ("a/b", "c") and ("a", "b/c") stay two scopes.
 *
 * Throws `ConfigurationError` when `scope()` returned no principal (the server's bug), and
 * `UnstorableScopeError` for a scope Postgres cannot store as given: it refuses U+0000 in
 * text, would store an unpaired surrogate as U+FFFD (two principals would meet), and a
 * btree entry holds ~2.7 kB. No message shows the principal; one blaming a long route
 * (a URL's path, which the client chose) quotes its start.
 */
export function storedScope(principal: unknown, path: string, factory: string): string {
  if (typeof principal !== 'string' || principal.length === 0) {
    throw new ConfigurationError(
      `${factory}: scope() returned ${typeof principal === 'string' ? 'an empty string' : String(principal)} ` +
        `for "${shownRoute(path)}"; it must return a non-empty string naming the caller (tenant/user).`,
    );
  }
  const named = principal.replaceAll('%', '%25').replaceAll('/', '%2F');
  const scope = `${named}/${path}`;
  const tooLong = scope.length * 3 > MAX_SCOPE_BYTES && bytesOf(scope) > MAX_SCOPE_BYTES;
  if (tooLong && bytesOf(path) >= bytesOf(named)) {
    throw new UnstorableScopeError(
      `The route "${shownRoute(path)}" is ${bytesOf(path)} bytes long: with the caller's ` +
        `name it makes a scope longer than ${MAX_SCOPE_BYTES} bytes, which the idempotency ` +
        'store cannot keep; the call was not run. Send it to a shorter URL.',
    );
  }
  const problem = principal.includes('\u0000')
    ? 'contains U+0000'
    : UNPAIRED_SURROGATE.test(principal)
      ? 'contains an unpaired UTF-16 surrogate'
      : tooLong
        ? `makes a scope longer than ${MAX_SCOPE_BYTES} bytes`
        : undefined;
  if (problem !== undefined) {
    throw new UnstorableScopeError(
      `The principal that scope() named for "${shownRoute(path)}" ${problem}, which the ` +
        'idempotency store cannot keep; the call was not run. Name callers with printable text (an id).',
    );
  }
  return scope;
}

const bytesOf = (text: string) => encoder.encode(text).length;

function shownRoute(path: string): string {
  return path.length <= SHOWN_ROUTE ? path : `${path.slice(0, SHOWN_ROUTE)}…`;
}
