import { IDEMPOTENCY_KEY_BATCH_HEADER, validateKey } from '@idem/core';
import { requirePositive, resolveErrorPolicy } from '@idem/core/store';
import type { AnyTRPCMiddlewareFunction, TRPCMiddlewareFunction } from '@trpc/server';
import { createKeyedRunner, type KeyedCall } from '../adapter/createKeyedRunner.js';
import { failureOf } from '../adapter/failureOf.js';
import { fingerprintWithin } from '../adapter/fingerprintWithin.js';
import { missingKey } from '../adapter/missingKey.js';
import { storedScope } from '../adapter/storedScope.js';
import { validateDerivedKey } from '../adapter/validateDerivedKey.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
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
import { procedureInput } from './procedureInput.js';
import {
  idempotencyRequestOf,
  middlewareAnswer,
  refuse,
  refuseBeforeStore,
} from './trpcAnswers.js';
import { trpcErrorPolicy } from './trpcErrorPolicy.js';

/** @default of `maxInputBytes`. */
export const DEFAULT_MAX_INPUT_BYTES = 1_048_576;
export { DEFAULT_LOCK_WAIT_MS } from '../postgres/transactionMode.js';

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
 * | used on a query or subscription | `INTERNAL_SERVER_ERROR`, `INVALID_CONFIGURATION` |
 * | idem's tables missing (`migrate(db)` not run) | `INTERNAL_SERVER_ERROR`, `INVALID_CONFIGURATION` naming `migrate(db)` |
 * | the store failed (unreachable, a refused statement) | `INTERNAL_SERVER_ERROR`, `STORE_FAILED` |
 *
 * A store failure (either of the last two) is told once to `onStoreError`, with the
 * driver's error, which the answer never shows; by default, one `console.error` line.
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
  const runner = createKeyedRunner(options, {
    factory: 'idempotent()',
    errorPolicy: resolveErrorPolicy(options.errorPolicy, trpcErrorPolicy),
  });
  const maxInputBytes = requirePositive(
    'maxInputBytes',
    options.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES,
    { integer: true, unit: 'bytes' },
  );
  const required = options.required ?? true;
  const derive = options.key;

  const middleware: AnyTRPCMiddlewareFunction = async (opts) => {
    const { ctx, path, batchIndex } = opts;
    const request = idempotencyRequestOf(opts);
    const unkeyed = () => {
      if (!required) return opts.next({ ctx: { idempotency: undefined } });
      throw missingKey('mutation', WHERE_KEYS_GO);
    };
    let call: KeyedCall;
    try {
      // Without key(), a call without a valid key is answered before its input is even read.
      let key = derive ? undefined : sentKeyOf(request, batchIndex);
      if (!derive && key === undefined) return await unkeyed();
      const { input: rawInput } = await procedureInput(opts, request);
      if (derive) {
        // After `.input()`, tRPC hands middlewares the parsed input; before, only the raw one.
        const input = opts.input !== undefined ? opts.input : rawInput;
        const derived = await derive({ input, ctx, path });
        key =
          derived === undefined
            ? sentKeyOf(request, batchIndex)
            : validateDerivedKey(derived, `for "${path}"`);
      }
      if (key === undefined) return await unkeyed();
      const scope = storedScope(await options.scope({ ctx, path }), path, 'idempotent()');
      const fingerprinted = fingerprintWithin({ path, input: rawInput }, `the input of "${path}"`, {
        maxBytes: maxInputBytes,
        outerLevels: 1,
      });
      if (!fingerprinted.ok)
        return refuse(fingerprinted.cause, request, batchIndex, fingerprinted.refusal);
      let { fingerprint } = fingerprinted;
      if (typeof fingerprint !== 'string') fingerprint = await fingerprint;
      call = { scope, key, fingerprint, signal: opts.signal ?? new AbortController().signal };
    } catch (error) {
      return refuseBeforeStore(error, request, batchIndex);
    }
    try {
      const result = await runner.run(call, async (idempotency) => {
        const ran = await opts.next({ ctx: { idempotency } });
        return ran.ok
          ? { ok: true, value: ran.data }
          : { ok: false, error: failureOf(ran.error, idempotency) };
      });
      return middlewareAnswer(result, request, batchIndex);
    } catch (error) {
      return refuse(error, request, batchIndex);
    }
  };
  return middleware;
}

/** Where a tRPC client puts its keys, for the answer to a call that sent none. */
const WHERE_KEYS_GO =
  ` (in a batch, in ${IDEMPOTENCY_KEY_BATCH_HEADER} by batch index; with @idem/client, pass ` +
  '`headers: idempotencyHeaders` to the terminating link)';

/** The key the request sent for the call at `batchIndex`, validated, if any. */
function sentKeyOf(request: IdempotencyRequest, batchIndex: number): string | undefined {
  const sent = request.keyOf(batchIndex);
  return sent === undefined ? undefined : validateKey(sent);
}
