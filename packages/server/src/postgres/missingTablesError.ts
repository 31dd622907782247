import { ConfigurationError, isIdempotencyError } from '@idem/core';
import { causeChain } from './connectionError.js';

/** Postgres `undefined_table`. */
const UNDEFINED_TABLE = '42P01';
/** Postgres `undefined_column`. */
const UNDEFINED_COLUMN = '42703';

/** The message Postgres (and PGlite) gives it for one of idem's tables, schema or not. */
const IDEM_RELATION = /relation "(?:[^"]*\.)?idem_\w+" does not exist/;
/**
 * Its message for a column of one of idem's tables: `column "x" of relation "idem_keys"`
 * (an INSERT or UPDATE) or `column idem_keys.x` (a qualified read).
 */
const IDEM_COLUMN =
  /column (?:"[^"]*" of relation "(?:[^"]*\.)?idem_\w+"|(?:\w+\.)?idem_\w+\.\w+) does not exist/;
/** Its message for a column of a read from one table, which it does not name. */
const UNNAMED_COLUMN = /^column "[^"]*" does not exist/;

/**
 * What `error`, or an error in its chain of causes (Drizzle wraps the driver's error in a
 * `DrizzleQueryError`), says of idem's tables (`idem_keys`, `idem_outbox`, `idem_inbox`):
 * `'missing'` for SQLSTATE 42P01 naming an `idem_` relation (`migrate(db)` was never run on
 * this database), `'outdated'` for 42703 naming a column of one (it was run by an older
 * version of idem, which had fewer columns), else `undefined`. An error of idem's own family
 * is neither: it already says what it is.
 */
function idemTablesProblem(
  error: unknown,
  idemStatement: boolean,
): 'missing' | 'outdated' | undefined {
  for (const link of causeChain(error)) {
    if (isIdempotencyError(link)) return undefined;
    const { code, message } = link;
    if (typeof message !== 'string') continue;
    if (code === UNDEFINED_TABLE && IDEM_RELATION.test(message)) return 'missing';
    if (
      code === UNDEFINED_COLUMN &&
      (IDEM_COLUMN.test(message) || (idemStatement && UNNAMED_COLUMN.test(message)))
    ) {
      return 'outdated';
    }
  }
  return undefined;
}

/**
 * The error for idem's tables missing, or older than this version of idem (see
 * {@link idemTablesProblem}), or `undefined` for any other: a `ConfigurationError` naming
 * `migrate(db)`, with `error` as its cause. `what` says what did not happen (`'enqueue()
 * wrote nothing'`). The message holds no SQL and no table name, so that an adapter may
 * answer with it: the cause keeps the driver's words.
 *
 * `idemStatement`: the failed statement is one of idem's own (a store's, the sweep's), so
 * a missing column that Postgres names without its table (a read from one table) is one of
 * idem's too. Where the app's statements can fail too (a consumer's handler), leave it off.
 */
export function missingTablesError(
  error: unknown,
  what: string,
  idemStatement = false,
): ConfigurationError | undefined {
  const problem = idemTablesProblem(error, idemStatement);
  if (problem === undefined) return undefined;
  const state =
    problem === 'missing'
      ? "idem's tables do not exist in this database"
      : "idem's tables in this database are older than this version of idem (a column it " +
        'uses is missing)';
  return new ConfigurationError(
    `${what}: ${state}. Run \`migrate(db)\` from \`@idem/server/postgres\` on it once (e.g. ` +
      'at start-up) before using idem; retrying will not help until then.',
    { cause: error },
  );
}
