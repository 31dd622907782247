import {
  type Attempt,
  deriveKey,
  type HandlerContext,
  type IdempotencyEvent,
  type IdempotencySettings,
  type RunResult,
} from '@idem/core';
import type { ClaimResult } from '@idem/core/store';
import { admit, TIMED_OUT } from './admission.js';
import { fromServer, hasCode, isConnectionError } from './connectionError.js';
import { endedWithItsConnection, heldTransaction, parked, watchEnd } from './driverEnd.js';
import { drizzleStore } from './drizzleStore.js';
import { checkTransactionsOn } from './nodePostgresClient.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { transactionOpener } from './pipelinedTransaction.js';
import { settle } from './settleTransaction.js';
import { TransactionAbortedError } from './TransactionAbortedError.js';
import {
  Abandoned,
  answered,
  busy,
  type CallState,
  claimTerms,
  type Opened,
  Rollback,
  type Settled,
  type TransactionCall,
} from './transactionCall.js';

export type { TransactionCall };

import { transactionStores } from './transactionStores.js';

/** How long a transaction-mode duplicate waits on the key's lock with `inProgress: 'reject'`. */
export const DEFAULT_LOCK_WAIT_MS = 5_000;

/** The longest a duplicate waits on the key's lock under the engine's `inProgress`. */
export function lockWaitMsOf(settings: Pick<IdempotencySettings, 'inProgress'>): number {
  return settings.inProgress === 'reject' ? DEFAULT_LOCK_WAIT_MS : settings.inProgress.waitMs;
}

/**
 * The handler's context in transaction mode: core's, plus `tx`, the transaction that claims
 * the key and completes it. Every write of the handler goes through `tx`: it commits with
 * the completion, or not at all.
 *
 * `step(name, fn)` simply runs `fn` here: the transaction makes the work atomic, so there is
 * never a half-finished attempt to resume. `signal` is the request's signal.
 *
 * **PGlite** has a single connection: while the transaction is open, any query on `db`
 * (rather than `tx`) waits for the transaction to end, which waits for the handler, so the
 * request hangs. Inside a transaction-mode handler, use only `tx`.
 *
 * Once the transaction has ended (its connection lost, say while the handler awaited another
 * service and the server ended the idle transaction), `tx` throws instead of sending: the
 * statement would go to a closed socket, or to a new connection outside any transaction.
 */
export interface TransactionIdempotency<TTx> extends HandlerContext {
  tx: TTx;
}

export interface TransactionModeConfig {
  /** The database, or how to get it on the first call (an app that opens it later). */
  db: () => Promise<PgDatabaseLike>;
  settings: IdempotencySettings;
  /** The longest a duplicate waits on the key's lock. */
  lockWaitMs: number;
  /** Hears each event; undefined when nobody listens (no event is built then). */
  emit: ((event: IdempotencyEvent) => void) | undefined;
}

/** Postgres `lock_not_available`: `lock_timeout` ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Transaction mode, shared by every adapter: claim, handler and completion in one
 * transaction on `db`, the handler's answer judged as `run` of `@idem/core` judges it
 * (an {@link Attempt}), its end told as a {@link RunResult}.
 *
 * Statements, in order:
 * 1. the key's record, read outside any transaction: a completed key (a replay or a
 *    mismatch) is answered from this one read, and nothing else runs
 * 2. `BEGIN` (on postgres-js, in one write with the claim: see `transactionOpener`)
 * 3. the claim, one statement: it takes the key's transaction-scoped advisory lock (a
 *    duplicate waits here, bounded by `lock_timeout`, set and put back within the statement
 *    only when the lock is held: a free key's is taken at once), then inserts the key (a
 *    key that exists after all, a takeover or a duplicate that waited, costs the full claim
 *    after it)
 * 4. the handler's own statements (only when claimed)
 * 5. the fenced completion `UPDATE`
 * 6. `COMMIT`, which frees the lock: a waiting duplicate then finds the completed key
 *    (on postgres-js, sent right behind the completion, without waiting for its answer)
 *
 * So inside the transaction the key costs two statements of its own, the claim and the
 * completion. A released answer rolls everything back, and the key is free again. A stored
 * failure (or an answer kept without its writes, `keep: 'answer'`) must roll back the
 * handler's writes yet keep duplicates out until the answer is stored: see
 * `storeAfterRollback`. A crash in between closes the connection, which frees the lock, and
 * leaves nothing stored: a retry runs again. So does a connection lost at any point, and
 * after it nothing more is sent on that connection, not even the driver's `ROLLBACK` (see
 * `endedWithItsConnection`). A replay is the read alone, never the handler.
 */
export function transactionMode(config: TransactionModeConfig) {
  const { settings, lockWaitMs, emit } = config;
  // Built on the first call, once the database is there: the autocommit reads, and the
  // claim and completion rendered once for every call's transaction.
  let opened: Promise<Opened> | undefined;
  const open = () => {
    opened ??= config.db().then(
      (db) => {
        checkTransactionsOn(db, 'Transaction mode');
        return {
          db,
          begin: transactionOpener(db),
          reader: drizzleStore(db),
          storeIn: transactionStores(db, lockWaitMs),
        };
      },
      (error: unknown) => {
        opened = undefined;
        throw error;
      },
    );
    return opened;
  };

  return async function runInTransaction<T>(
    call: TransactionCall,
    handler: (idempotency: TransactionIdempotency<PgDatabaseLike>) => Promise<Attempt<T>>,
  ): Promise<RunResult<T>> {
    const database = await open();
    const startedAt = settings.clock.monotonicNow();
    const state: CallState = {
      call,
      settings,
      database,
      report(type, version, error) {
        if (!emit) return;
        const event: IdempotencyEvent = {
          type,
          scope: call.scope,
          key: call.key,
          durationMs: settings.clock.monotonicNow() - startedAt,
        };
        if (version !== undefined) event.version = version;
        if (error !== undefined) event.error = error;
        emit(event);
      },
      // The wait is bounded before the transaction starts too: PGlite has one connection,
      // so there a duplicate queues for the connection, not for the key's lock, and a pool
      // that is exhausted makes a Postgres duplicate queue the same way. lock_timeout covers
      // the rest.
      admission: admit(settings.clock, lockWaitMs),
      driver: { ended: false, done: undefined },
    };
    try {
      return await runCall(state, handler);
    } finally {
      state.admission.close();
    }
  };
}

async function runCall<T>(
  state: CallState,
  handler: (idempotency: TransactionIdempotency<PgDatabaseLike>) => Promise<Attempt<T>>,
): Promise<RunResult<T>> {
  const { call, database, admission, driver } = state;
  // The read queues for a connection too (PGlite's only one may be in a transaction).
  const existing = await admission.race(database.reader.get(call.scope, call.key));
  if (existing === TIMED_OUT) return busy(state);
  if (existing?.status === 'completed') {
    admission.enter();
    return answered(
      state,
      existing.fingerprint === call.fingerprint
        ? { status: 'replay', record: existing }
        : { status: 'mismatch', record: existing },
    );
  }
  let settled: Settled<T> | typeof TIMED_OUT;
  // What the handler came to, once it ran and its outcome is in the transaction: from then
  // on, only the COMMIT can fail the transaction.
  let ran: Settled<T> | undefined;
  try {
    const work = database.begin(async (tx) => {
      try {
        ran = await claimAndRun(state, tx, handler);
        return ran;
      } catch (error) {
        const cause = error instanceof Rollback ? error.released?.error : error;
        if (driver.ended || (await endedWithItsConnection(cause, driver.done))) {
          return parked<Settled<T>>();
        }
        throw error;
      }
    });
    watchEnd(driver, work);
    settled = await admission.race(work);
  } catch (error) {
    if (!(error instanceof Rollback)) {
      if (ran && 'result' in ran && !ran.afterRollback && rolledBackAtCommit(error)) {
        // A completion sent with the COMMIT that failed aborted the transaction: its
        // failure is the answer (one that found no row: the lease was lost).
        const refused = await ran.completion?.then(
          () => undefined,
          (completionError: unknown) => completionError,
        );
        if (refused !== undefined && !aborted(refused)) throw refused;
        return failedCommit(state, refused ?? error);
      }
      // A statement of the handler had aborted the transaction: the completion was refused.
      if (aborted(error)) return failedCommit(state, error);
      throw error;
    }
    if (error.released) state.report('released', undefined, error.released.error);
    return error.result as RunResult<T>;
  }
  if (settled === TIMED_OUT) return busy(state);
  if ('result' in settled) {
    // The transaction has committed. Where the completion went out with the COMMIT, a
    // completion that failed rolled that back, and fails here.
    if (settled.completion) await settled.completion;
    state.report('completed', settled.version, settled.error);
    return settled.result;
  }
  // Only a lease-mode attempt leaves a committed in-progress row behind.
  return answered(state, settled.claim);
}

const aborted = (error: unknown) => error instanceof TransactionAbortedError;

/**
 * Whether a COMMIT that failed was answered by the server with an error (a constraint the
 * app deferred to the end of the transaction, a serialization failure) or with `ROLLBACK`
 * (an aborted transaction): Postgres has then rolled the whole transaction back. A COMMIT
 * that lost its connection has no answer: it may have committed, so that one is the
 * store's failure, and a retry finds out which.
 */
function rolledBackAtCommit(error: unknown): boolean {
  return aborted(error) || (fromServer(error) && !isConnectionError(error));
}

/**
 * A transaction that rolled back at its COMMIT, or that a statement of the handler had
 * aborted (the handler caught the failure and answered as if not): the handler's writes
 * failed as surely as a statement of its own that failed, and nothing was stored, so the
 * key is free (released) and the caller gets that error as the handler's, whatever the
 * error policy says (there is no transaction left to store an answer in). A retry runs
 * again.
 */
function failedCommit(state: CallState, error: unknown): RunResult<never> {
  state.report('released', undefined, error);
  return { ok: false, replayed: false, error };
}

async function claimAndRun<T>(
  state: CallState,
  tx: PgDatabaseLike,
  handler: (idempotency: TransactionIdempotency<PgDatabaseLike>) => Promise<Attempt<T>>,
): Promise<Settled<T>> {
  const { call, settings } = state;
  const { scope, key, fingerprint } = call;
  if (!state.admission.enter()) throw new Abandoned();
  const store = state.database.storeIn(tx);
  let claim: ClaimResult;
  try {
    claim = await store.claim({ scope, key, fingerprint, ...claimTerms(settings) });
  } catch (error) {
    if (!hasCode(error, LOCK_NOT_AVAILABLE)) throw error;
    // The failed claim aborted the transaction: it can only roll back.
    throw new Rollback(busy(state, error), undefined);
  }
  if (claim.status !== 'claimed') return { claim };
  const { record } = claim;
  state.report(claim.takeover ? 'takeover' : 'claimed', record.version);
  let attempt: Attempt<T>;
  try {
    attempt = await handler({
      key,
      scope,
      tx: heldTransaction(tx, state.driver),
      signal: call.signal,
      attempt: record.attempts,
      version: record.version,
      takeover: claim.takeover,
      deriveKey: (suffix) => deriveKey(scope, key, suffix),
      step: async (_name, fn) => fn(),
    });
  } catch (error) {
    attempt = { ok: false, error };
  }
  // A handler can carry on past a statement that lost the connection, or make an answer of
  // that failure: the driver has given the transaction up by then (its end reaches here in
  // fewer promise steps than the failed statement reaches the handler's answer), and idem's
  // next statement would go to a closed socket (see endedWithItsConnection).
  if (state.driver.ended) return parked();
  return settle(state, tx, store, record, attempt);
}
