import { ConfigurationError, type ErrorDecision, type ErrorPolicyOption } from '@idem/core';
import type { KeyedOptions, Lazy } from '../adapter/KeyedOptions.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';

/** What `key()` gets: the request, and its body as text and, for a JSON body, parsed. */
export interface HandlerKeyCall {
  /** The request (its body already read: use `text` and `json`). */
  request: Request;
  /** The body decoded as UTF-8. */
  text: string;
  /** The parsed body when the request's `Content-Type` is JSON, else `undefined`. */
  json: unknown;
}

/**
 * The handler's options: those every adapter shares (where keys live, the mode,
 * `required`, `inProgress`, and core's engine options), plus what a Fetch request needs:
 * who is calling (`scope`), the route, where the key comes from, the body's limit, and
 * which answers are stored.
 */
export interface IdempotentHandlerOptions<TRequired extends boolean = true>
  extends Omit<KeyedOptions<TRequired>, 'errorPolicy'> {
  /**
   * Names the principal (tenant, user, API client, webhook sender) the request acts for,
   * from the request's headers or URL (its body has been read by then: use `key` for the
   * body).
   * The method and route are added, so a key is stored under (principal, method, route),
   * and one caller's key never replays another's response.
   */
  scope: (request: Request) => string | Promise<string>;
  /**
   * The route the key belongs to, in the scope and the fingerprint: a fixed name
   * (`'/api/orders'`) when the path carries ids that should not split keys, or a function.
   * @default the request URL's pathname
   */
  route?: string | ((request: Request) => string);
  /**
   * Whether the query string is part of the request's fingerprint, so that one key sent
   * again with another query (`?cents=500`, then `?cents=90000`) is refused 422
   * `KEY_MISMATCH` instead of replaying the first answer. Its parameters count sorted by
   * name (order within a name kept) and percent-decoded, so `?b=2&a=1` and `?a=1&b=%32` are
   * one query. `false` when the query carries nothing the handler acts on (tracking
   * parameters a retry may change).
   * @default true
   */
  fingerprintQuery?: boolean;
  /**
   * Derives the key on the server (a webhook's event id, an intent id in the body); when it
   * returns a key, a key sent in `Idempotency-Key` is ignored, and when it returns
   * `undefined`, the header's key is used. Validated like a header key.
   * @default undefined (the key comes from the Idempotency-Key header)
   */
  key?: (call: HandlerKeyCall) => string | undefined | Promise<string | undefined>;
  /**
   * The largest request body read, in bytes. A larger one (declared or streamed) is
   * answered 413 (`INPUT_TOO_LARGE`) as soon as it passes the limit; nothing is stored.
   * @default 1_048_576 (1 MiB)
   */
  maxBodyBytes?: number;
  /**
   * The response headers a replay carries (case-insensitive); the first answer carries all
   * of the handler's. `[...DEFAULT_REPLAY_HEADERS, 'x-order-id']` adds one.
   * @default DEFAULT_REPLAY_HEADERS
   */
  replayHeaders?: readonly string[];
  /**
   * Which responses the handler returns are stored (replayed to every retry) and which
   * release the key (a retry runs the handler again).
   * @default storeResponseByStatus (2xx, 3xx and 4xx stored, except 401, 408, 425, 429 and 499; 5xx released)
   */
  responsePolicy?: (response: Response) => ErrorDecision;
  /**
   * Which exceptions the handler throws are stored, as a problem+json answer with the
   * error's `status` and message, and which release the key and are thrown on.
   * @default defaultErrorPolicy of @idem/core (`retryable: false` or a 4xx `status` stored, except 401, 408, 425, 429, 499; anything else released)
   */
  errorPolicy?: ErrorPolicyOption;
  /**
   * The page documenting idem's error codes: each problem's `type` is this URL with
   * `#<code in lower case>` appended.
   * @default DEFAULT_ERROR_DOCS_URL of @idem/server (https://idem-js.github.io/idem/guide/errors)
   */
  docsUrl?: string;
}

/** Transaction mode: the handler gets the transaction its writes go through as `idempotency.tx`. */
export interface TransactionHandlerOptions<
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
> extends Omit<IdempotentHandlerOptions<TRequired>, 'mode' | 'store' | 'db'> {
  mode: 'transaction';
  /** The Drizzle Postgres database whose transaction the handler gets as `tx`, or a function giving it. */
  db: Lazy<TDb>;
  store?: undefined;
}

/**
 * Throws `ConfigurationError` for a limit that cannot work, when the handler is made (at
 * start-up) rather than on its first request; the options every adapter shares are the
 * kernel's to check.
 */
export function checkHandlerOptions(options: {
  maxBodyBytes: number;
  fingerprintQuery: unknown;
}): void {
  const { maxBodyBytes, fingerprintQuery } = options;
  if (typeof fingerprintQuery !== 'boolean') {
    throw new ConfigurationError(
      `fingerprintQuery must be true or false; got ${String(fingerprintQuery)}.`,
    );
  }
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) {
    throw new ConfigurationError(
      `maxBodyBytes must be a positive whole number of bytes; got ${maxBodyBytes}.`,
    );
  }
}
