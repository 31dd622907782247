import { DEFAULT_ERROR_DOCS_URL, errorTypeUrl } from '../adapter/errorDocs.js';
import { type RefusalCode, refusalOf } from '../adapter/refusals.js';

export { DEFAULT_ERROR_DOCS_URL };

/**
 * `data.idempotency` of an error that idem itself raised: what a client needs to tell, for
 * instance, "this key is busy, retry in `retryAfterMs`" from the procedure's own CONFLICT.
 */
export interface IdempotencyErrorData {
  /**
   * `'REQUEST_IN_PROGRESS'` and `'LEASE_LOST'` (both 409) mean "retry the same call with
   * the same key later"; `'KEY_MISMATCH'` (422), `'INVALID_KEY'` (400) and
   * `'INPUT_TOO_LARGE'` (413) mean "do not".
   */
  code: RefusalCode;
  /**
   * A link to this code's documentation (the IETF idempotency draft asks error answers to
   * carry one): `<docsUrl>#<code in lower case>`.
   */
  type: string;
  /** For the 409s: when a retry may succeed, in milliseconds (also sent as `Retry-After`). */
  retryAfterMs?: number;
  /** For `'INVALID_KEY'`: `'missing'`, `'empty'`, `'too_long'`, `'invalid_character'` or `'malformed_header'`. */
  reason?: string;
  /** For `'INPUT_TOO_LARGE'`: the limit, in bytes (`maxInputBytes`). */
  maxInputBytes?: number;
}

export interface IdempotencyErrorDataOptions {
  /**
   * The page that documents idem's error codes; `data.idempotency.type` is this URL with
   * `#<code in lower case>` appended. Point it at your own API documentation if you
   * document the codes there.
   * @default DEFAULT_ERROR_DOCS_URL ('https://idem-js.github.io/idem/guide/errors')
   */
  docsUrl?: string;
}

/**
 * Adds `data.idempotency` to a tRPC error shape when the error came from idem (its cause
 * is one of `@idem/core`'s errors, or the 413 of `maxInputBytes`), and drops `data.stack`
 * from every shape. Use it in your `errorFormatter`, after your own fields:
 *
 * ```ts
 * initTRPC.context<Context>().create({
 *   errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error),
 * });
 * ```
 *
 * Why the stack goes: tRPC adds `data.stack` whenever `NODE_ENV` is not `'production'`;
 * it shows your server's file paths, and a stored error's replay could never reproduce the
 * original's stack, so the replay's body would differ from the first answer's. Without
 * the stack, a replayed error's body is the original's byte for byte.
 */
export function withIdempotencyErrorData<TShape extends { data: object }>(
  shape: TShape,
  error: { cause?: unknown },
  options: IdempotencyErrorDataOptions = {},
): TShape & { data: { idempotency?: IdempotencyErrorData } } {
  const { stack: _stack, ...data } = shape.data as { stack?: unknown };
  const withoutStack = { ...shape, data } as TShape;
  const idempotency = idempotencyDataOf(error.cause, options.docsUrl ?? DEFAULT_ERROR_DOCS_URL);
  if (!idempotency) return withoutStack;
  return { ...withoutStack, data: { ...data, idempotency } };
}

function idempotencyDataOf(cause: unknown, docsUrl: string): IdempotencyErrorData | undefined {
  const refusal = refusalOf(cause);
  if (refusal?.code === undefined) return undefined;
  const { code, retryAfterMs, reason, limitBytes } = refusal;
  const idempotency: IdempotencyErrorData = { code, type: errorTypeUrl(docsUrl, code) };
  if (retryAfterMs !== undefined) idempotency.retryAfterMs = retryAfterMs;
  if (reason !== undefined) idempotency.reason = reason;
  if (limitBytes !== undefined) idempotency.maxInputBytes = limitBytes;
  return idempotency;
}

/**
 * A ready `errorFormatter` for apps without one of their own:
 * `initTRPC.context<Context>().create({ errorFormatter: idempotencyErrorFormatter })`.
 */
export function idempotencyErrorFormatter<TShape extends { data: object }>(options: {
  shape: TShape;
  error: { cause?: unknown };
}): TShape & { data: { idempotency?: IdempotencyErrorData } } {
  return withIdempotencyErrorData(options.shape, options.error);
}
