import { missingTablesError } from '../postgres/missingTablesError.js';
import type { StoreErrorReport } from './KeyedOptions.js';
import { refusalOf } from './refusals.js';
import { StoreFailedError } from './StoreFailedError.js';

/** The request a store failed under, as `onStoreError` names it. */
export type FailedCall = Pick<StoreErrorReport, 'scope' | 'key' | 'mode'>;

/** `onStoreError`'s signature. */
export type StoreErrorHook = (error: unknown, report: StoreErrorReport) => void;

/**
 * What a run that threw answers, told once to `onStoreError`. An error of idem's own table
 * (a refusal) goes on as it is. Anything else came from the store: a missing idem table is
 * a `ConfigurationError` naming `migrate(db)` (retrying cannot cure it), any other failure a
 * `StoreFailedError` (a retry may succeed). Either keeps the store's error as its cause,
 * and its message, which the client gets, holds no SQL. `idemStatements`: the store is the
 * one idem runs on `db`, whose statements are all idem's own (see `missingTablesError`).
 */
export function storeFailure(
  error: unknown,
  call: FailedCall,
  onStoreError: StoreErrorHook,
  idemStatements = false,
) {
  if (refusalOf(error) !== undefined) return error;
  const failure =
    missingTablesError(error, 'This call was not run', idemStatements) ??
    new StoreFailedError(error);
  const code = failure.code === 'STORE_FAILED' ? 'STORE_FAILED' : 'INVALID_CONFIGURATION';
  try {
    onStoreError(error, { code, message: failure.message, ...call });
  } catch {
    // Swallowed on purpose: a report must not change the answer.
  }
  return failure;
}

/**
 * The default `onStoreError`: one `console.error` line per failed request, naming the
 * adapter, the answer, the key and the driver's own words (the deepest error of the cause
 * chain, with its code), so that a 500 is never silent on the server.
 */
export function logStoreError(factory: string): StoreErrorHook {
  return (error, { code, scope, key, mode }) => {
    const what =
      code === 'STORE_FAILED'
        ? 'the idempotency store failed'
        : "idem's tables do not exist: run migrate(db) from @idem/server/postgres";
    console.error(
      `idem: ${factory} answered 500 ${code} to key ${JSON.stringify(key)} (scope ` +
        `${JSON.stringify(scope)}, ${mode} mode): ${what}: ${driverWords(error)}`,
    );
  };
}

/** How far down a chain of causes to look. */
const MAX_CAUSE_DEPTH = 8;

/**
 * The message of the deepest error in `error`'s chain of causes (the driver's, under
 * Drizzle's `Failed query: …`, which would put the SQL and its values in the log), with its
 * `code`, on one line.
 */
function driverWords(error: unknown): string {
  let deepest = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH; depth++) {
    const cause: unknown =
      typeof deepest === 'object' && deepest !== null
        ? (deepest as { cause?: unknown }).cause
        : undefined;
    if (cause === undefined || cause === null) break;
    deepest = cause;
  }
  if (typeof deepest !== 'object' || deepest === null) return String(deepest);
  const { message, code, errors } = deepest as {
    message?: unknown;
    code?: unknown;
    errors?: unknown;
  };
  // An AggregateError (a connection tried on every address a host name has) has no message
  // of its own.
  let words = typeof message === 'string' ? message : String(deepest);
  if (words === '' && Array.isArray(errors)) words = errors.map(driverWords).join('; ');
  const suffix = typeof code === 'string' || typeof code === 'number' ? ` [${code}]` : '';
  return `${words.replace(/\s+/g, ' ').trim()}${suffix}`;
}
