import { type Attempt, type HandlerContext, InvalidKeyError, type RunResult } from '@idem/core';
import { resolveErrorPolicy } from '@idem/core/store';
import {
  createKeyedRunner,
  type KeyedCall,
  type KeyedContext,
} from '../adapter/createKeyedRunner.js';
import { failureOf } from '../adapter/failureOf.js';
import { fingerprintWithin } from '../adapter/fingerprintWithin.js';
import type { OptionalIf } from '../adapter/KeyedOptions.js';
import { type Refusal, refusalOf } from '../adapter/refusals.js';
import { storedScope } from '../adapter/storedScope.js';
import { validateDerivedKey } from '../adapter/validateDerivedKey.js';
import type { PgDatabaseLike, TransactionOf } from '../postgres/PgDatabaseLike.js';
import type { TransactionIdempotency } from '../postgres/transactionMode.js';
import { defaultActionInput, formDataOf, formKeyOf, IDEMPOTENCY_KEY_FIELD } from './actionInput.js';
import {
  checkActionOptions,
  DEFAULT_ACTION_IN_PROGRESS,
  type IdempotentActionOptions,
  type TransactionActionOptions,
} from './IdempotentActionOptions.js';
import { controlError, keepsWrites, type NextControl, nextControlOf } from './nextControl.js';

/**
 * Makes a Next.js Server Action safe to submit twice: the first call with a key runs the
 * handler, and every later call with that key (same principal, same action) gets the first
 * call's result, or its stored error, or its `redirect()`, without running it again.
 *
 * ```ts
 * 'use server';
 * export const pay = idempotentAction(
 *   { db, name: 'checkout/pay', scope: async () => `session:${await sessionId()}` },
 *   async (idempotency, form: FormData) => {
 *     const charge = await idempotency.step('charge', () =>
 *       psp.charge(cents, { idempotencyKey: idempotency.deriveKey('charge') }));
 *     return { paid: charge.id };
 *   },
 * );
 * // <form action={pay}><input {...idempotencyKeyField()} />…</form>
 * ```
 *
 * The handler gets the idempotency context first, then the action's own arguments; the
 * action keeps their types, so it fits `<form action>`, `useActionState` (`(state, form)`)
 * and a direct call from a client component. The key comes from the form's hidden
 * `idempotency-key` field (rendered by {@link idempotencyKeyField}) or from `key`. Lease
 * mode (the default) and transaction mode (`mode: 'transaction'`, the handler's writes go
 * through `idempotency.tx` and commit with the result) work as in the tRPC middleware and
 * the Fetch handler, with the same error policy and the same refusals; `onRefusal` turns a
 * refusal into a return value.
 *
 * Options that cannot work throw `ConfigurationError` here, when the module loads.
 */
export function idempotentAction<
  TArgs extends unknown[],
  TResult,
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
  TRefused = never,
>(
  options: TransactionActionOptions<TArgs, TDb, TRequired, TRefused>,
  handler: (
    idempotency: OptionalIf<TransactionIdempotency<TransactionOf<TDb>>, TRequired>,
    ...args: TArgs
  ) => TResult | Promise<TResult>,
): (...args: TArgs) => Promise<TResult | TRefused>;
export function idempotentAction<
  TArgs extends unknown[],
  TResult,
  TRequired extends boolean = true,
  TRefused = never,
>(
  options: IdempotentActionOptions<TArgs, TRequired, TRefused>,
  handler: (
    idempotency: OptionalIf<HandlerContext, TRequired>,
    ...args: TArgs
  ) => TResult | Promise<TResult>,
): (...args: TArgs) => Promise<TResult | TRefused>;
export function idempotentAction(
  options:
    | IdempotentActionOptions<unknown[], boolean, unknown>
    | TransactionActionOptions<unknown[], PgDatabaseLike, boolean, unknown>,
  handler: (idempotency: never, ...args: unknown[]) => unknown,
): (...args: unknown[]) => Promise<unknown> {
  const action = actionOf(options, handler);
  return (...args) => perform(action, args);
}

/** What the action was made with, checked once: everything a call needs. */
type Action = ReturnType<typeof actionOf>;

function actionOf(
  options:
    | IdempotentActionOptions<unknown[], boolean, unknown>
    | TransactionActionOptions<unknown[], PgDatabaseLike, boolean, unknown>,
  handler: (idempotency: never, ...args: unknown[]) => unknown,
) {
  const maxInputBytes = checkActionOptions(options);
  return {
    options,
    name: options.name,
    required: options.required ?? true,
    maxInputBytes,
    runner: createKeyedRunner(
      { ...options, inProgress: options.inProgress ?? DEFAULT_ACTION_IN_PROGRESS },
      { factory: 'idempotentAction()', errorPolicy: resolveErrorPolicy(options.errorPolicy) },
    ),
    // The overloads type each mode's context; here the handler takes either.
    run: handler as (idempotency: KeyedContext | undefined, ...args: unknown[]) => unknown,
  };
}

/** A keyed call's outcome as stored: the handler's value, or the way Next.js left it. */
type Outcome = { value: unknown } | { control: NextControl };

/** Server Actions have no request signal: the lease's own signal is the handler's. */
const NEVER_ABORTED = new AbortController().signal;

async function perform(action: Action, args: unknown[]): Promise<unknown> {
  let call: KeyedCall | { refusal: Refusal; cause: Error } | undefined;
  try {
    call = await keyedCallOf(action, args);
  } catch (error) {
    return refused(action, error);
  }
  if (call === undefined) return await action.run(undefined, ...args);
  if ('refusal' in call) return refused(action, call.cause, call.refusal);
  let thrown: unknown;
  let result: RunResult<Outcome>;
  try {
    result = await action.runner.run(call, async (idempotency): Promise<Attempt<Outcome>> => {
      try {
        return { ok: true, value: { value: await action.run(idempotency, ...args) }, keep: 'all' };
      } catch (error) {
        const control = nextControlOf(error);
        if (!control) return { ok: false, error: failureOf(error, idempotency) };
        thrown = error;
        return { ok: true, value: { control }, keep: keepsWrites(control) ? 'all' : 'answer' };
      }
    });
  } catch (error) {
    // The store failed, or its tables are missing: reported by the runner, refused here.
    return refused(action, error);
  }
  if (result.ok) {
    const outcome = result.value as Outcome;
    if ('value' in outcome) return outcome.value;
    // The first run throws Next.js's own error; a replay, one rebuilt from its digest.
    throw result.replayed || thrown === undefined ? controlError(outcome.control) : thrown;
  }
  // idem's refusal of this call (not a stored error replayed, which is the handler's).
  if (!result.replayed) {
    const refusal = refusalOf(result.error);
    if (refusal) return refused(action, result.error, refusal);
  }
  throw result.error;
}

/** The keyed call `args` make, `undefined` for a call that runs unkeyed, or a refusal. */
async function keyedCallOf(
  action: Action,
  args: unknown[],
): Promise<KeyedCall | { refusal: Refusal; cause: Error } | undefined> {
  const { options, name } = action;
  let key: string | undefined;
  if (options.key) {
    const derived = await options.key(...args);
    if (derived !== undefined) key = validateDerivedKey(derived, `for action "${name}"`);
  }
  key ??= formKeyOf(formDataOf(args));
  if (key === undefined) {
    if (!action.required) return undefined;
    throw missingActionKey(name);
  }
  const scope = storedScope(await options.scope(), `action ${name}`, 'idempotentAction()');
  const input = options.input ? options.input(...args) : await defaultActionInput(args);
  const fingerprinted = fingerprintWithin(
    { action: name, input },
    `the input of action "${name}"`,
    { maxBytes: action.maxInputBytes, outerLevels: 1 },
  );
  if (!fingerprinted.ok) return { refusal: fingerprinted.refusal, cause: fingerprinted.cause };
  return { scope, key, fingerprint: await fingerprinted.fingerprint, signal: NEVER_ABORTED };
}

/**
 * The answer to an error idem raised: `onRefusal`'s value, or the error thrown; any other
 * error (the app's own, from `scope` or `key`) is thrown as it is.
 */
function refused(action: Action, error: unknown, refusal = refusalOf(error)): unknown {
  if (refusal && action.options.onRefusal) return action.options.onRefusal(refusal);
  throw error;
}

function missingActionKey(name: string): InvalidKeyError {
  return new InvalidKeyError(
    'missing',
    `Action "${name}" requires an idempotency key: render <input {...idempotencyKeyField()} /> ` +
      `inside its form (a hidden "${IDEMPOTENCY_KEY_FIELD}" field), or derive one with the ` +
      '`key` option. Every submission of one rendered form then carries the same key.',
  );
}
