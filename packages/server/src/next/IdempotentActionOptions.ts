import { ConfigurationError, type InProgressWait } from '@idem/core';
import { requirePositive } from '@idem/core/store';
import type { KeyedOptions, Lazy } from '../adapter/KeyedOptions.js';
import type { Refusal } from '../adapter/refusals.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';

/**
 * How idem answered a call it did not run (or whose run it cannot hand back), for
 * `onRefusal`: the HTTP status it stands for, idem's `code` (`INVALID_KEY`,
 * `KEY_MISMATCH`, `REQUEST_IN_PROGRESS`, `LEASE_LOST`, `INPUT_TOO_LARGE`,
 * `UNSERIALIZABLE_VALUE`, `INVALID_CONFIGURATION`, `STORE_FAILED`), a message a person can
 * read, and for the 409s `retryAfterMs`. The same table answers the tRPC middleware and the
 * Fetch handler.
 */
export type IdempotencyRefusal = Refusal;

/** @default of `inProgress` for Server Actions: a duplicate submit waits up to 10 s for the first. */
export const DEFAULT_ACTION_IN_PROGRESS: InProgressWait = { waitMs: 10_000 };

/** @default of `maxInputBytes` for Server Actions: 1 MiB of fingerprinted input. */
export const DEFAULT_MAX_ACTION_INPUT_BYTES = 1_048_576;

/**
 * The options of `idempotentAction`: those every adapter shares (where keys live, the
 * mode, `required`, `errorPolicy`, `onStoreError`, and core's engine options), plus what a
 * Server Action needs: its name, who is calling, where its key comes from, what its
 * fingerprint covers, and what a refusal returns.
 */
export interface IdempotentActionOptions<
  TArgs extends unknown[],
  TRequired extends boolean = true,
  TRefused = never,
> extends Omit<KeyedOptions<TRequired>, 'inProgress'> {
  /**
   * The action's name, stable across deployments (`'checkout/pay'`): keys are stored under
   * (principal, action), so two actions never share a key. Not the function's name, which a
   * bundler may change.
   */
  name: string;
  /**
   * Names the principal (tenant, user, session) the action runs for, read on the server:
   * `cookies()` or `headers()` of `next/headers`, or your auth library's session. Never from
   * the action's arguments, which the browser sends.
   */
  scope: () => string | Promise<string>;
  /**
   * Where the key comes from. By default, the `idempotency-key` field
   * ({@link IDEMPOTENCY_KEY_FIELD}) of the action's `FormData` argument (the last one, when
   * there are several), which `idempotencyKeyField()` renders into the form. A function
   * derives it from the arguments instead (an intent id the client passes, an id in the
   * input); returning `undefined` falls back to the form field.
   */
  key?: (...args: TArgs) => string | undefined | Promise<string | undefined>;
  /**
   * What the payload fingerprint covers (a key sent again with another payload is refused
   * `KEY_MISMATCH`). By default, the `FormData` argument's fields without the key field (so
   * `useActionState`'s previous state does not count), or, for an action without a
   * `FormData` argument, all of its arguments.
   */
  input?: (...args: TArgs) => unknown;
  /**
   * The largest fingerprinted input, in bytes of its canonical JSON; a larger one is
   * refused (`INPUT_TOO_LARGE`) before anything is stored.
   * @default 1_048_576 (1 MiB)
   */
  maxInputBytes?: number;
  /**
   * Turns idem's refusals into the action's return value (for `useActionState`, a state
   * that says what went wrong); its return type joins the action's. Without it, the refusal
   * is thrown as idem's typed error (`RequestInProgressError`, `KeyMismatchError`,
   * `InvalidKeyError`, `StoreFailedError`, …), which Next.js shows as an error page.
   * @default undefined (refusals are thrown)
   */
  onRefusal?: (refusal: IdempotencyRefusal) => TRefused;
  /**
   * What a duplicate does while the first call with its key still runs: a form submitted
   * twice (a double click, Enter pressed twice) sends the second submit at once, and the
   * browser shows only the second's answer, so by default it waits for the first and gets
   * its result. `'reject'` refuses it with `REQUEST_IN_PROGRESS` instead.
   * @default { waitMs: 10_000 }
   */
  inProgress?: 'reject' | InProgressWait;
}

/** Transaction mode: the action's handler gets the transaction its writes go through as `idempotency.tx`. */
export interface TransactionActionOptions<
  TArgs extends unknown[],
  TDb extends PgDatabaseLike,
  TRequired extends boolean = true,
  TRefused = never,
> extends Omit<IdempotentActionOptions<TArgs, TRequired, TRefused>, 'mode' | 'store' | 'db'> {
  mode: 'transaction';
  /** The Drizzle Postgres database whose transaction the handler gets as `tx`, or a function giving it. */
  db: Lazy<TDb>;
  store?: undefined;
}

/**
 * Throws `ConfigurationError` for options of `idempotentAction` that cannot work, when the
 * action is made (when its module loads) rather than on its first call; the options every
 * adapter shares are the kernel's to check. Returns `maxInputBytes`, resolved.
 */
export function checkActionOptions(options: {
  name: unknown;
  key?: unknown;
  input?: unknown;
  onRefusal?: unknown;
  maxInputBytes?: number | undefined;
}): number {
  const { name } = options;
  if (typeof name !== 'string' || name.trim().length === 0) {
    throw new ConfigurationError(
      `idempotentAction() needs \`name\`, a non-empty string naming the action ('checkout/pay'); ` +
        `got ${typeof name === 'string' ? 'an empty string' : String(name)}. Keys are stored ` +
        'under it, so it must stay the same across deployments.',
    );
  }
  for (const option of ['key', 'input', 'onRefusal'] as const) {
    const value = options[option];
    if (value !== undefined && typeof value !== 'function') {
      throw new ConfigurationError(
        `idempotentAction() option \`${option}\` must be a function; got ${typeof value}.`,
      );
    }
  }
  return requirePositive('maxInputBytes', options.maxInputBytes ?? DEFAULT_MAX_ACTION_INPUT_BYTES, {
    integer: true,
    unit: 'bytes',
  });
}
