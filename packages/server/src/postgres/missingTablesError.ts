import { ConfigurationError, isIdempotencyError } from '@idem/core';
import { causeChain } from './connectionError.js';

/** Postgres `undefined_table`. */
const UNDEFINED_TABLE = '42P01';

/** The message Postgres (and PGlite) gives it for one of idem's tables, schema or not. */
const IDEM_RELATION = /relation "(?:[^"]*\.)?idem_\w+" does not exist/;

/**
 * Whether `error`, or an error in its chain of causes (Drizzle wraps the driver's error in
 * a `DrizzleQueryError`), says that one of idem's tables (`idem_keys`, `idem_outbox`,
 * `idem_inbox`) does not exist: SQLSTATE 42P01 naming an `idem_` relation, which means
 * `migrate(db)` was not run on this database. An error of idem's own family is not: it
 * already says what it is.
 */
function isMissingIdemTable(error: unknown): boolean {
  for (const link of causeChain(error)) {
    if (isIdempotencyError(link)) return false;
    const { code, message } = link;
    if (code === UNDEFINED_TABLE && typeof message === 'string' && IDEM_RELATION.test(message)) {
      return true;
    }
  }
  return false;
}

/**
 * The error for a missing idem table (see {@link isMissingIdemTable}), or `undefined` for
 * any other: a `ConfigurationError` naming `migrate(db)`, with `error` as its cause. `what`
 * says what did not happen (`'enqueue() wrote nothing'`). The message holds no SQL and no
 * table name, so that an adapter may answer with it: the cause keeps the driver's words.
 */
export function missingTablesError(error: unknown, what: string): ConfigurationError | undefined {
  if (!isMissingIdemTable(error)) return undefined;
  return new ConfigurationError(
    `${what}: idem's tables do not exist in this database. Run \`migrate(db)\` from ` +
      '`@idem/server/postgres` on it once (e.g. at start-up) before using idem; retrying ' +
      'will not help until then.',
    { cause: error },
  );
}
