import {
  ConfigurationError,
  type ErrorDecision,
  type ErrorPolicyOption,
  type HandlerContext,
  type IdempotencyOptions,
} from '@idem/core';
import type { IdempotencyStore } from '@idem/core/store';
import type { PgDatabaseLike } from '../drizzle/PgDatabaseLike.js';
import type { TransactionContext } from '../transactionMode/transactionMode.js';

/** What `key()` gets: the request, and its body as text and, for a JSON body, parsed. */
export interface HandlerKeyCall {
  /** The request (its body already read: use `text` and `json`). */
  request: Request;
  /** The body decoded as UTF-8. */
  text: string;
  /** The parsed body when the request's `Content-Type` is JSON, else `undefined`. */
  json: unknown;
}

/** `idempotency` in the handler: core's handler context, or `undefined` when unprotected. */
export type HandlerIdempotency<TRequired extends boolean> = TRequired extends false
  ? HandlerContext | undefined
  : HandlerContext;

/** `idempotency` in a transaction-mode handler: core's context plus `tx`, the transaction to write through. */
export type HandlerTransactionIdempotency<TTx, TRequired extends boolean> = TRequired extends false
  ? TransactionContext<TTx> | undefined
  : TransactionContext<TTx>;

export interface IdempotentHandlerOptions<TRequired extends boolean = true>
  extends Omit<IdempotencyOptions, 'store' | 'errorPolicy'> {
  /**
   * `'lease'`: the claim commits first and the handler runs under a lease (any side
   * effects). `'transaction'` (needs `db`): the claim, the handler's writes through
   * `idempotency.tx` and the stored response commit in one Postgres transaction.
   * @default 'lease'
   */
  mode?: 'lease' | 'transaction';
  /** Where keys live (lease mode): any `IdempotencyStore`. One of `store` and `db` is required. */
  store?: IdempotencyStore;
  /** A Drizzle Postgres database; keys go to `idem_keys` through `drizzleStore(db)`. */
  db?: PgDatabaseLike;
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
   * A request without a key: `true` answers 400 (`INVALID_KEY`, reason `missing`); `false`
   * runs the handler unprotected, with `idempotency` undefined.
   * @default true
   */
  required?: TRequired;
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
   * @default DEFAULT_ERROR_DOCS_URL of @idem/server (https://www.npmjs.com/package/@idem/server)
   */
  docsUrl?: string;
}

/** Transaction mode: the handler gets the transaction its writes go through as `idempotency.tx`. */
export interface TransactionHandlerOptions<
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
> extends Omit<IdempotentHandlerOptions<TRequired>, 'mode' | 'store' | 'db'> {
  mode: 'transaction';
  /** The Drizzle Postgres database whose transaction the handler gets as `tx`. */
  db: TDb;
  store?: undefined;
}

/**
 * Throws `ConfigurationError` for options that cannot work together, when the handler is
 * made (at start-up) rather than on its first request.
 */
export function checkHandlerOptions(options: {
  mode: unknown;
  store: unknown;
  db: unknown;
  scope: unknown;
  maxBodyBytes: number;
  fingerprintQuery: unknown;
}): void {
  const { mode, store, db, scope, maxBodyBytes, fingerprintQuery } = options;
  if (typeof fingerprintQuery !== 'boolean') {
    throw new ConfigurationError(
      `fingerprintQuery must be true or false; got ${String(fingerprintQuery)}.`,
    );
  }
  if (typeof scope !== 'function') {
    throw new ConfigurationError(
      'idempotentHandler() needs `scope: (request) => string` naming who is calling (tenant/user): ' +
        "without it one caller's key could replay another caller's response.",
    );
  }
  if (store && db)
    throw new ConfigurationError('idempotentHandler() takes `store` or `db`, not both.');
  if (!store && !db) {
    throw new ConfigurationError(
      'idempotentHandler() needs `db` (a Drizzle Postgres database) or `store`.',
    );
  }
  if (mode !== 'lease' && mode !== 'transaction') {
    throw new ConfigurationError(`mode must be 'lease' or 'transaction'; got ${String(mode)}.`);
  }
  if (mode === 'transaction' && !db) {
    throw new ConfigurationError(
      "mode 'transaction' needs `db` (a Drizzle Postgres database): the key is claimed and " +
        'completed inside the transaction the handler writes through, which a `store` cannot join.',
    );
  }
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) {
    throw new ConfigurationError(
      `maxBodyBytes must be a positive whole number of bytes; got ${maxBodyBytes}.`,
    );
  }
}
