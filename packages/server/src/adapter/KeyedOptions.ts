import type { ErrorPolicyOption, IdempotencyOptions, InProgressWait } from '@idem/core';
import type { IdempotencyStore } from '@idem/core/store';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';

/**
 * A value, or a function that gives it when first needed (sync or async): for an app that
 * builds its handlers when a module loads, before its database is open. The function is
 * called once, on the first request, and again only after it failed.
 */
export type Lazy<T> = T | (() => T | Promise<T>);

/** With `required: false`, a request without a key runs unprotected: no `idempotency`. */
export type OptionalIf<T, TRequired extends boolean> = TRequired extends false ? T | undefined : T;

/** What `onStoreError` hears besides the store's own error: the request, and its answer. */
export interface StoreErrorReport {
  /**
   * What the request was answered, a 500 either way: `'STORE_FAILED'`, the store could not
   * be reached or refused a statement (a retry with the same key may succeed);
   * `'INVALID_CONFIGURATION'`, idem's tables do not exist in the database (run `migrate(db)`
   * from `@idem/server/postgres`; retrying will not help until then).
   */
  code: 'STORE_FAILED' | 'INVALID_CONFIGURATION';
  /** The message the client got: no SQL, no driver text. */
  message: string;
  /** The scope the key is stored under (the principal, then what was called). */
  scope: string;
  key: string;
  mode: 'lease' | 'transaction';
}

/**
 * The options every adapter shares (the tRPC middleware, the Fetch handler): where keys
 * live and in which mode, what a call without a key does, and core's engine options
 * (`leaseMs`, `heartbeatMs`, `ttlMs`, `retryWindowMs`, `serializer`,
 * `inProgressRetryAfterMs`, `clock`, `onEvent`, documented in `@idem/core`), which go to the
 * engine as they are, and `onStoreError`.
 */
export interface KeyedOptions<TRequired extends boolean = boolean>
  extends Omit<IdempotencyOptions, 'store' | 'errorPolicy' | 'inProgress'> {
  /**
   * `'lease'`: the claim commits first, the work runs under a heartbeat-renewed lease, and
   * the completion is fenced; for work with side effects outside the database.
   * `'transaction'` (needs `db`): the claim, the work's writes through `idempotency.tx` and
   * the completion commit in one Postgres transaction.
   * @default 'lease'
   */
  mode?: 'lease' | 'transaction' | undefined;
  /** Where keys live (lease mode): any `IdempotencyStore`, or a function giving it. One of `store` and `db` is required. */
  store?: Lazy<IdempotencyStore> | undefined;
  /** A Drizzle Postgres database, or a function giving it; keys go to `idem_keys` through `drizzleStore(db)`. */
  db?: Lazy<PgDatabaseLike> | undefined;
  /**
   * A request without a key: `true` refuses it (400, `INVALID_KEY`, reason `missing`);
   * `false` runs it unprotected, with `idempotency` undefined.
   * @default true
   */
  required?: TRequired | undefined;
  /**
   * What a duplicate does while the first request with its key still runs.
   *
   * Lease mode: `'reject'` answers at once with 409 (`REQUEST_IN_PROGRESS`, tRPC's
   * `CONFLICT`) and `Retry-After`; `{ waitMs }` polls for up to `waitMs` and replays the
   * first request's outcome when it finishes (409 after that).
   *
   * Transaction mode: a duplicate always waits on the key's lock, which ends in a replay
   * when the first request commits. The wait is bounded by Postgres' `lock_timeout`, set to
   * `waitMs`, or 5 000 ms with `'reject'`; past it, the 409 above.
   * @default 'reject'
   */
  inProgress?: 'reject' | InProgressWait;
  /**
   * Which failures are stored and replayed, and which release the key; the parts left out
   * come from the adapter's default policy.
   * `(error) => 'store' | 'release'` replaces only the decision.
   */
  errorPolicy?: ErrorPolicyOption;
  /**
   * Hears each request the idempotency store failed under, once: `error` is the store's
   * own error (the driver's, with its message and SQLSTATE `code` somewhere in its `cause`
   * chain), which the client's 500 never shows; `report` says what the client was answered
   * and for which key. Exceptions thrown here are swallowed.
   * @default one `console.error` line per failed request, naming the driver's message
   */
  onStoreError?: ((error: unknown, report: StoreErrorReport) => void) | undefined;
}
