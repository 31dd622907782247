/**
 * The Redis key of the record `(scope, key)`: `<prefix>{<length of scope>:<scope>:<key>}`,
 * with `%`, `{`, `}` and lone surrogates in scope and key escaped as `%` and four hex digits.
 *
 * - One-to-one: the length prefix keeps pairs apart (`('a:b', 'c')` vs `('a', 'b:c')`), and
 *   the escape keeps distinct strings distinct in UTF-8, which turns every lone surrogate
 *   into U+FFFD.
 * - The braces are the Redis Cluster hash tag, and no `}` can end it early: the whole
 *   identity picks the slot, so records spread over the cluster, and anything ever stored
 *   beside a record under the same tag lands on its node.
 */
export function recordKey(prefix: string, scope: string, key: string): string {
  const escapedScope = escapeTagText(scope);
  return `${prefix}{${escapedScope.length}:${escapedScope}:${escapeTagText(key)}}`;
}

/** The SCAN MATCH pattern of every record key under `prefix`. */
export function recordKeyPattern(prefix: string): string {
  return `${prefix.replace(/[*?[\]\\]/g, (char) => `\\${char}`)}{*`;
}

/** Whether `text` holds anything {@link escapeTagText} may change (a paired surrogate too). */
const MAY_ESCAPE = /[%{}\uD800-\uDFFF]/;

function escapeTagText(text: string): string {
  // Most scopes and keys hold none of these: a scan of one class, not the full pattern.
  if (!MAY_ESCAPE.test(text)) return text;
  return text.replace(
    /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    (unit) => `%${unit.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
