import type { ErrorPolicyOption, HandlerContext } from '@idem/core';
import type { IdempotencyStore } from '@idem/core/store';
import type { TRPCUnsetMarker } from '@trpc/server';
import type { KeyedOptions, Lazy, OptionalIf } from '../adapter/KeyedOptions.js';
import type { PgDatabaseLike, TransactionOf } from '../postgres/PgDatabaseLike.js';
import type { TransactionIdempotency } from '../postgres/transactionMode.js';

export type { TransactionOf };

/**
 * `ctx.idempotency` in a lease-mode procedure:
 * - `key`, `scope`: the call's key and the scope it is stored under;
 * - `step(name, fn)`: a recovery point: `fn` runs once per key, its result is saved, and
 *   an attempt that takes over after a crash or a released failure gets the saved result
 *   instead of running `fn` again;
 * - `deriveKey(suffix)`: a key for a downstream call (a payment provider), the same on
 *   every attempt of this key and different between scopes;
 * - `signal`: aborted when this attempt loses its lease (stop: another attempt owns the key);
 * - `attempt` (1, then one more per takeover), `takeover`, `version` (the fencing token).
 */
export type LeaseIdempotency = HandlerContext;

export type { OptionalIf, TransactionIdempotency };

/**
 * The context a middleware sees: the app's context with the fields earlier middlewares
 * added or narrowed (`next({ ctx })`) written over it.
 */
export type ContextWith<TContext, TOverrides> = Omit<TContext, keyof TOverrides> & TOverrides;

/**
 * The input `key()` sees: the procedure's validated input when the middleware comes after
 * `.input(schema)`, and `unknown` (the input as the client sent it) when it comes before,
 * where tRPC has not parsed the input yet.
 */
export type KeyInput<TInput> = [TInput] extends [TRPCUnsetMarker] ? unknown : TInput;

/** What `key()` gets: the call's input, the context, and the procedure path. */
export interface KeyCall<TContext, TInput> {
  input: KeyInput<TInput>;
  ctx: TContext;
  path: string;
}

/**
 * The middleware's options: those every adapter shares (where keys live, the mode,
 * `required`, `inProgress`, and core's engine options, which go to the engine as they are),
 * plus what a tRPC procedure needs: who is calling (`scope`), where the key comes from, and
 * how big an input may be. The store comes from `db` or `store` (see the modes below).
 */
export interface IdempotentBaseOptions<TContext, TRequired extends boolean, TInput = unknown>
  extends Omit<KeyedOptions<TRequired>, 'mode' | 'store' | 'db' | 'errorPolicy'> {
  /**
   * Names the principal (tenant, user, API client) the call acts for, e.g.
   * `({ ctx }) => \`tenant:${ctx.tenantId}/user:${ctx.user.id}\``. The middleware adds the
   * procedure path itself, so a key is stored under (principal, procedure).
   *
   * Required, because keys come from clients and nothing stops two clients from sending
   * the same one: without the principal in the scope, user B sending user A's key (by
   * accident, a buggy client, or on purpose) would be answered with A's stored response.
   * Return something stable for every caller that may share results and unique between
   * those who must not; for a public procedure, an anonymous session id.
   */
  scope: (input: { ctx: TContext; path: string }) => string | Promise<string>;
  /**
   * Derives the key on the server from the call instead of reading it from the request:
   * `({ input }) => input.checkoutId`, a webhook's event id, a message id. The key then
   * names one intent, whichever request carries it (a reload, a second tab, a redelivery).
   *
   * The derived key goes through the same rules as a header key: validated (1–255
   * printable ASCII, else `BAD_REQUEST` with `INVALID_KEY`), stored under `scope`, and bound
   * to the call's fingerprint. When it returns a key, a key sent in the request is
   * ignored (the server knows the intent; clients such as `idempotencyLink` send a fresh
   * key per call); when it returns `undefined`, the request's key is used as usual.
   *
   * `input` is typed when the middleware comes after `.input(schema)` (tRPC has parsed
   * it then); before `.input()`, it is the raw input, typed `unknown`.
   * @default undefined (the key comes from the request)
   */
  key?: (call: KeyCall<TContext, TInput>) => string | undefined | Promise<string | undefined>;
  /**
   * Which failures are stored and replayed, and which release the key; the parts you
   * leave out come from `trpcErrorPolicy` (not core's default).
   * `(error) => 'store' | 'release'` replaces only the decision.
   * @default trpcErrorPolicy (see its table: business 4xx stored, 401/408/428/429/499, 5xx and non-tRPC exceptions released)
   */
  errorPolicy?: ErrorPolicyOption;
  /**
   * The largest input accepted, in UTF-8 bytes of its canonical JSON. A larger input is
   * refused with `PAYLOAD_TOO_LARGE` (413) before anything is stored.
   * @default 1_048_576 (1 MiB)
   */
  maxInputBytes?: number;
}

/** Lease mode with your own store (`memoryStore()` in tests, or any `IdempotencyStore`). */
export interface LeaseStoreOptions<TContext, TRequired extends boolean, TInput = unknown>
  extends IdempotentBaseOptions<TContext, TRequired, TInput> {
  /**
   * `'lease'`: the claim commits first, the procedure runs under a heartbeat-renewed
   * lease, and the completion is fenced; for procedures with external side effects.
   * @default 'lease'
   */
  mode?: 'lease';
  /** Where keys live, or a function giving the store on the first call. */
  store: Lazy<IdempotencyStore>;
  db?: undefined;
}

/** Lease mode on Postgres: keys live in `idem_keys` through `drizzleStore(db)`. */
export interface LeaseDbOptions<TContext, TRequired extends boolean, TInput = unknown>
  extends IdempotentBaseOptions<TContext, TRequired, TInput> {
  /** @default 'lease' */
  mode?: 'lease';
  /**
   * A Drizzle Postgres database (postgres-js, node-postgres or PGlite), or a function giving
   * it on the first call; keys go through `drizzleStore(db)`.
   */
  db: Lazy<PgDatabaseLike>;
  store?: undefined;
}

export type LeaseModeOptions<TContext, TRequired extends boolean, TInput = unknown> =
  | LeaseStoreOptions<TContext, TRequired, TInput>
  | LeaseDbOptions<TContext, TRequired, TInput>;

/**
 * Transaction mode: the claim, the procedure's writes through `ctx.idempotency.tx` and the
 * completion commit in one Postgres transaction; for procedures whose side effects are
 * all in this database.
 */
export interface TransactionModeOptions<
  TContext,
  TDb extends PgDatabaseLike,
  TRequired extends boolean,
  TInput = unknown,
> extends IdempotentBaseOptions<TContext, TRequired, TInput> {
  mode: 'transaction';
  /** The Drizzle Postgres database whose transaction the procedure gets as `tx`, or a function giving it. */
  db: Lazy<TDb>;
  store?: undefined;
}
