/** Postgres's `in_failed_sql_transaction`: a statement in a transaction a failure aborted. */
export const IN_FAILED_SQL_TRANSACTION = '25P02';

/**
 * A transaction that one of its own statements had aborted, and that went on as if not (the
 * app caught the statement's failure, or never awaited the statement): Postgres refused what
 * came after (`25P02`) and answered its `COMMIT` with `ROLLBACK`, so none of its writes were
 * committed. It carries the code of that answer of the server's: in transaction mode the
 * call fails with it as the handler's own failure, the key stays free and a retry runs
 * again.
 */
export class TransactionAbortedError extends Error {
  readonly code = IN_FAILED_SQL_TRANSACTION;
  constructor(options?: { cause?: unknown }) {
    super(
      'The transaction was rolled back: a statement in it had failed without ending it (its ' +
        'error was caught, or the statement was not awaited), so none of its writes were ' +
        'committed.',
      options,
    );
    this.name = 'TransactionAbortedError';
  }
}
