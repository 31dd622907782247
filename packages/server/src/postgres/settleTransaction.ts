import type { Attempt, RunResult } from '@idem/core';
import { type IdempotencyRecord, type StoredOutcome, storedErrorOf } from '@idem/core/store';
import { endedWithItsConnection } from './driverEnd.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { storeAfterRollback } from './storeAfterRollback.js';
import { type CallState, Rollback, type Settled, storedOf } from './transactionCall.js';
import type { TransactionStore } from './transactionStores.js';

/** Settles a claimed key by the handler's attempt: commit, or roll back and store, or release. */
export async function settle<T>(
  state: CallState,
  tx: PgDatabaseLike,
  store: TransactionStore,
  record: IdempotencyRecord,
  attempt: Attempt<T>,
): Promise<Extract<Settled<T>, { result: unknown }>> {
  const { serializer, errorPolicy, ttlMs } = state.settings;
  const result: RunResult<T> = attempt.ok
    ? { ok: true, replayed: false, value: attempt.value, version: record.version }
    : { ok: false, replayed: false, error: attempt.error };
  if (attempt.ok && attempt.keep === 'nothing') throw new Rollback(result, { error: undefined });
  if (
    !attempt.ok &&
    (errorPolicy.classify(attempt.error) === 'release' ||
      // A failure that lost the connection lost the transaction with it: nothing is left to
      // store the answer in, and no statement may follow on that connection.
      (await endedWithItsConnection(attempt.error, state.driver.done)))
  ) {
    throw new Rollback(result, { error: attempt.error });
  }
  let outcome: StoredOutcome;
  try {
    outcome = attempt.ok
      ? { kind: 'success', value: serializer.serialize(storedOf(attempt)) }
      : { kind: 'error', error: storedErrorOf(errorPolicy, attempt.error, serializer).stored };
  } catch (error) {
    // An answer that cannot be stored: its writes roll back with it, and a retry runs again.
    throw new Rollback({ ok: false, replayed: false, error }, { error });
  }
  if (attempt.ok && (attempt.keep ?? 'all') === 'all') {
    // Where the completion goes straight to postgres-js, it is sent now and the transaction's
    // COMMIT right behind it, without waiting for its answer: one round trip less per call.
    // A completion that finds no row fails inside Postgres (`rowRequired`), which aborts the
    // transaction, so the COMMIT rolls back: the writes never commit without the answer.
    // Its answer is awaited once the transaction has ended (`runCall`).
    const { done, pipelined } = store.sendCompletion(record, outcome, ttlMs);
    if (pipelined) {
      done.catch(() => {});
      return { result, completion: done, version: record.version };
    }
    // Elsewhere it is answered before the COMMIT is sent.
    await done;
    return { result, version: record.version };
  }
  // A transaction one of the handler's statements aborted can only roll back: nothing is
  // stored, and the caller gets the handler's own answer (a retry runs again).
  if (!(await storeAfterRollback(tx, record, outcome, ttlMs))) {
    throw new Rollback(result, { error: attempt.ok ? undefined : attempt.error });
  }
  return {
    result,
    version: record.version,
    error: attempt.ok ? undefined : attempt.error,
    afterRollback: true,
  };
}
