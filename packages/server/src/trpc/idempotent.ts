import {
  ConfigurationError,
  createIdempotency,
  IDEMPOTENCY_KEY_BATCH_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  InvalidKeyError,
  validateKey,
} from '@idem/core';
import { notifyObserver, requirePositive, resolveErrorPolicy } from '@idem/core/store';
import {
  type AnyTRPCMiddlewareFunction,
  TRPCError,
  type TRPCMiddlewareFunction,
} from '@trpc/server';
import { drizzleStore } from '../drizzle/drizzleStore.js';
import type { PgDatabaseLike } from '../drizzle/PgDatabaseLike.js';
import { lockWaitOf } from '../transactionMode/transactionMode.js';
import { validateDerivedKey } from '../validateDerivedKey.js';
import { fingerprintWithin, scopeOf } from './callIdentity.js';
import type {
  ContextWith,
  LeaseIdempotency,
  LeaseModeOptions,
  OptionalIf,
  TransactionIdempotency,
  TransactionModeOptions,
  TransactionOf,
} from './IdempotentOptions.js';
import type { IdempotencyRequest, IdempotencyRequestContext } from './idempotencyContext.js';
import { leaseMode } from './leaseMode.js';
import { procedureInput } from './procedureInput.js';
import { toTRPCErrorMarkingRequest } from './toTRPCErrorMarkingRequest.js';
import { type CallOutcome, type ProcedureResult, transactionMode } from './transactionMode.js';
import { trpcErrorPolicy } from './trpcErrorPolicy.js';

/** @default of `maxInputBytes`. */
export const DEFAULT_MAX_INPUT_BYTES = 1_048_576;
export { DEFAULT_LOCK_WAIT_MS } from '../transactionMode/transactionMode.js';

const MISSING_KEY =
  `This mutation requires an idempotency key: send it in the ${IDEMPOTENCY_KEY_HEADER} header ` +
  `(in a batch, in ${IDEMPOTENCY_KEY_BATCH_HEADER} by batch index), 1–255 printable ASCII ` +
  'characters (0x20–0x7E), e.g. crypto.randomUUID(), the same on every retry of the call.';

// The overloads spell out `TRPCMiddlewareFunction<…>` rather than an alias of it: TypeScript
// infers `TContext` and `TOverrides` from `.use()` only when both name the same alias.

/**
 * Makes a tRPC mutation safe to retry: the first call with an idempotency key runs, and
 * every later call with that key (in the same scope) gets the first call's response, or
 * its stored error, without running again.
 *
 * ```ts
 * const t = initTRPC.context<Context>().create({ transformer: superjson,
 *   errorFormatter: ({ shape, error }) => withIdempotencyErrorData(shape, error) });
 * const keyed = t.procedure.use(idempotent({ db, scope: ({ ctx }) => `user:${ctx.user.id}` }));
 * export const router = t.router({
 *   charge: keyed.input(z.object({ cents: z.number() })).mutation(async ({ ctx, input }) => {
 *     const payment = await ctx.idempotency.step('charge', () =>
 *       psp.charge(input.cents, { idempotencyKey: ctx.idempotency.deriveKey('charge') }));
 *     return { paymentId: payment.id };
 *   }),
 * });
 * ```
 *
 * The context must contain `idempotencyContext(...)` (it carries the request's keys and
 * response headers), and `.use(idempotent(...))` does not compile without it.
 *
 * Answers (with `withIdempotencyErrorData` in the error formatter, errors also carry
 * `data.idempotency.code`):
 *
 * | situation | answer |
 * |---|---|
 * | no key (with `required`) | `BAD_REQUEST` 400, `INVALID_KEY` (`reason: 'missing'`) |
 * | key not 1–255 printable ASCII, or malformed batch header | `BAD_REQUEST` 400, `INVALID_KEY` |
 * | more than one key field, or a broken quoted key | `BAD_REQUEST` 400, `INVALID_KEY` |
 * | a body that is not JSON, or input its `.input()` parsers refuse | tRPC's `BAD_REQUEST` 400, nothing stored |
 * | input nested deeper than 1,000 levels, or a principal the store cannot keep | `BAD_REQUEST` 400, nothing stored |
 * | input larger than `maxInputBytes` | `PAYLOAD_TOO_LARGE` 413, `INPUT_TOO_LARGE`, nothing stored |
 * | key used before with another input | `UNPROCESSABLE_CONTENT` 422, `KEY_MISMATCH` |
 * | key busy | `CONFLICT` 409, `REQUEST_IN_PROGRESS` + `retryAfterMs`, `Retry-After`, `Idempotency-Status: in-progress` |
 * | this attempt was taken over | `CONFLICT` 409, `LEASE_LOST`, `Idempotency-Status: lease-lost` |
 * | key completed | the stored data or error, and `Idempotent-Replayed: true` |
 * | used on a query or subscription | `INTERNAL_SERVER_ERROR`: a configuration error |
 *
 * The fingerprint that binds a key to its request is SHA-256 of the canonical JSON of
 * `{ path, input }`, with `input` as the client sent it (before validation).
 *
 * Options are checked here, at start-up: a set that cannot work throws `ConfigurationError`.
 */
export function idempotent<
  TContext extends IdempotencyRequestContext,
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
  TOverrides extends object = object,
  TInput = unknown,
>(
  options: TransactionModeOptions<ContextWith<TContext, TOverrides>, TDb, TRequired, TInput>,
): TRPCMiddlewareFunction<
  TContext,
  object,
  TOverrides,
  { idempotency: OptionalIf<TransactionIdempotency<TransactionOf<TDb>>, TRequired> },
  TInput
>;
export function idempotent<
  TContext extends IdempotencyRequestContext,
  TRequired extends boolean = true,
  TOverrides extends object = object,
  TInput = unknown,
>(
  options: LeaseModeOptions<ContextWith<TContext, TOverrides>, TRequired, TInput>,
): TRPCMiddlewareFunction<
  TContext,
  object,
  TOverrides,
  { idempotency: OptionalIf<LeaseIdempotency, TRequired> },
  TInput
>;
export function idempotent(
  options:
    | LeaseModeOptions<IdempotencyRequestContext, boolean>
    | TransactionModeOptions<IdempotencyRequestContext, PgDatabaseLike, boolean>,
): AnyTRPCMiddlewareFunction {
  const mode = checkMode(options);
  const maxInputBytes = requirePositive(
    'maxInputBytes',
    options.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES,
    { integer: true, unit: 'bytes' },
  );
  const required = options.required ?? true;
  const { onEvent } = options;
  // The engine takes the options as they are (they extend its own) and validates them
  // (lease vs TTL, heartbeat, waits); only the store and the error table are the
  // middleware's.
  const engine = createIdempotency({
    ...options,
    store: options.store ?? drizzleStore(options.db!),
    errorPolicy: resolveErrorPolicy(options.errorPolicy, trpcErrorPolicy),
  });
  const inTransaction =
    mode === 'transaction'
      ? transactionMode({
          db: options.db!,
          settings: engine.settings,
          lockWaitMs: lockWaitOf(engine.settings),
          emit: (event) => notifyObserver(onEvent, { ...event, mode: 'transaction' }),
        })
      : undefined;

  const derive = options.key;
  /**
   * The key `key()` derives, when it returns one (the request's key is then ignored), else
   * the request's; validated either way.
   */
  const derivedKeyOf = async (
    opts: Parameters<AnyTRPCMiddlewareFunction>[0],
    request: IdempotencyRequest,
    rawInput: unknown,
  ): Promise<string | undefined> => {
    // After `.input()`, tRPC hands middlewares the parsed input; before, only the raw one.
    const input = opts.input !== undefined ? opts.input : rawInput;
    const derived = await derive!({ input, ctx: opts.ctx, path: opts.path });
    if (derived === undefined) return sentKeyOf(request, opts.batchIndex);
    return validateDerivedKey(derived, `for "${opts.path}"`);
  };

  const middleware: AnyTRPCMiddlewareFunction = async (opts) => {
    const { ctx, path, batchIndex } = opts;
    if (opts.type !== 'mutation') {
      const message =
        `idempotent() is for mutations only, but "${path}" is a ${opts.type}. Queries and ` +
        'subscriptions do not change anything and can be retried as they are; remove ' +
        'idempotent() from this procedure.';
      throw new TRPCError({
        code: 'INTERNAL_SERVER_ERROR',
        message,
        cause: new ConfigurationError(message),
      });
    }
    const request = (ctx as Partial<IdempotencyRequestContext> | undefined)?.idempotencyRequest;
    if (!request) {
      const message =
        'idempotent() found no ctx.idempotencyRequest: spread idempotencyContext(opts) into the ' +
        'object your createContext returns (or idempotencyContext({ key }) for createCaller).';
      throw new TRPCError({
        code: 'INTERNAL_SERVER_ERROR',
        message,
        cause: new ConfigurationError(message),
      });
    }

    const unkeyed = () => {
      if (!required) return opts.next({ ctx: { idempotency: undefined } });
      throw toTRPCErrorMarkingRequest(
        new InvalidKeyError('missing', MISSING_KEY),
        request,
        batchIndex,
      );
    };
    let key: string | undefined;
    // Without key(), a call without a valid key is answered before its input is even read.
    if (!derive) {
      try {
        key = sentKeyOf(request, batchIndex);
      } catch (error) {
        throw toTRPCErrorMarkingRequest(error, request, batchIndex);
      }
      if (key === undefined) return unkeyed();
    }
    const { input: rawInput } = await procedureInput(opts, request);
    if (derive) {
      try {
        key = await derivedKeyOf(opts, request, rawInput);
      } catch (error) {
        throw toTRPCErrorMarkingRequest(error, request, batchIndex);
      }
    }
    if (key === undefined) return unkeyed();
    const scope = scopeOf(await options.scope({ ctx, path }), path);
    let fingerprint = fingerprintWithin({ path, input: rawInput }, maxInputBytes);
    if (typeof fingerprint !== 'string') fingerprint = await fingerprint;

    let answer: CallOutcome<ProcedureResult>;
    try {
      answer = inTransaction
        ? await inTransaction({
            scope,
            key,
            fingerprint,
            signal: opts.signal ?? new AbortController().signal,
            run: (idempotency) => opts.next({ ctx: { idempotency } }),
          })
        : await leaseMode(engine, { scope, key, fingerprint }, (idempotency) =>
            opts.next({ ctx: { idempotency } }),
          );
    } catch (error) {
      throw toTRPCErrorMarkingRequest(error, request, batchIndex);
    }
    if (answer.replayed) request.markReplayed(batchIndex);
    return asMiddlewareResult(answer.result);
  };
  return middleware;
}

function checkMode(
  options:
    | LeaseModeOptions<IdempotencyRequestContext, boolean>
    | TransactionModeOptions<IdempotencyRequestContext, PgDatabaseLike, boolean>,
): 'lease' | 'transaction' {
  if (typeof options?.scope !== 'function') {
    throw new ConfigurationError(
      'idempotent() needs `scope: ({ ctx, path }) => string` naming who is calling (tenant/user): ' +
        "without it one user's key could replay another user's response.",
    );
  }
  const mode = options.mode ?? 'lease';
  if (mode !== 'lease' && mode !== 'transaction') {
    throw new ConfigurationError(`mode must be 'lease' or 'transaction'; got ${String(mode)}.`);
  }
  if (options.store && options.db) {
    throw new ConfigurationError('idempotent() takes `store` or `db`, not both.');
  }
  if (mode === 'transaction' && !options.db) {
    throw new ConfigurationError(
      "mode 'transaction' needs `db` (a Drizzle Postgres database): the key is claimed and " +
        'completed inside the transaction the procedure writes through, which a `store` cannot join.',
    );
  }
  if (mode === 'lease' && !options.store && !options.db) {
    throw new ConfigurationError(
      'idempotent() needs `db` (a Drizzle Postgres database) or `store`.',
    );
  }
  return mode;
}

/**
 * tRPC's result type carries a compile-time marker so that middlewares pass `next()`'s
 * result through; a replay has no `next()` result to pass, so it builds one. The marker's
 * runtime value is the string tRPC itself uses, and tRPC never checks it.
 */
function asMiddlewareResult(
  result: ProcedureResult,
): Awaited<ReturnType<AnyTRPCMiddlewareFunction>> {
  if ('marker' in result) return result as Awaited<ReturnType<AnyTRPCMiddlewareFunction>>;
  return { ...result, marker: 'middlewareMarker' } as Awaited<
    ReturnType<AnyTRPCMiddlewareFunction>
  >;
}

/** The key the request sent for the call at `batchIndex`, validated, if any. */
function sentKeyOf(request: IdempotencyRequest, batchIndex: number): string | undefined {
  const sent = request.keyOf(batchIndex);
  return sent === undefined ? undefined : validateKey(sent);
}
