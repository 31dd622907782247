import { initTRPC, type TRPCProcedureBuilder, type TRPCUnsetMarker } from '@trpc/server';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import type {
  LeaseIdempotency,
  LeaseModeOptions,
  OptionalIf,
  TransactionIdempotency,
  TransactionModeOptions,
  TransactionOf,
} from './IdempotentOptions.js';
import type { IdempotencyRequestContext } from './idempotencyContext.js';
import { idempotent } from './idempotent.js';

/**
 * A partial procedure that `.concat()` adds to yours; see {@link idempotentProcedure}. Its
 * error shape is `never`, so that it adds nothing to the error shape of your procedures
 * (`.concat()` keeps your error formatter).
 */
export type IdempotentProcedure<TContext, TIdempotency> = TRPCProcedureBuilder<
  TContext,
  object,
  { idempotency: TIdempotency },
  TRPCUnsetMarker,
  TRPCUnsetMarker,
  TRPCUnsetMarker,
  TRPCUnsetMarker,
  false,
  never
>;

/**
 * `idempotent(options)` as a partial procedure, for `.concat()`:
 *
 * ```ts
 * const keyed = t.procedure.concat(
 *   idempotentProcedure({ db, scope: ({ ctx }: { ctx: Context }) => `user:${ctx.user.id}` }),
 * );
 * ```
 *
 * `.concat()` cannot pass your context type in, so annotate `scope`'s `ctx` as above.
 * `.use(idempotent(options))` infers it and is otherwise the same.
 */
export function idempotentProcedure<
  TContext extends IdempotencyRequestContext,
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
>(
  options: TransactionModeOptions<TContext, TDb, TRequired>,
): IdempotentProcedure<TContext, OptionalIf<TransactionIdempotency<TransactionOf<TDb>>, TRequired>>;
export function idempotentProcedure<
  TContext extends IdempotencyRequestContext,
  TRequired extends boolean = true,
>(
  options: LeaseModeOptions<TContext, TRequired>,
): IdempotentProcedure<TContext, OptionalIf<LeaseIdempotency, TRequired>>;
export function idempotentProcedure(
  options:
    | LeaseModeOptions<IdempotencyRequestContext, boolean>
    | TransactionModeOptions<IdempotencyRequestContext, PgDatabaseLike, boolean>,
): unknown {
  // A tRPC instance of its own, as tRPC recommends for reusable procedures: `.concat()`
  // keeps the app's transformer, error formatter and config, and only adds the middleware.
  const t = initTRPC.context<IdempotencyRequestContext>().create();
  return t.procedure.use(
    idempotent(options as LeaseModeOptions<IdempotencyRequestContext, boolean>),
  );
}
