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

/**
 * The options every adapter shares (the tRPC middleware, the Fetch handler): where keys
 * live and in which mode, what a call without a key does, and core's engine options
 * (`leaseMs`, `heartbeatMs`, `ttlMs`, `retryWindowMs`, `serializer`,
 * `inProgressRetryAfterMs`, `clock`, `onEvent`, documented in `@idem/core`), which go to the
 * engine as they are.
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
}
