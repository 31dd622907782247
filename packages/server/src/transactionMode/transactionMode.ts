import {
  deriveKey,
  type HandlerContext,
  type IdempotencyEvent,
  type IdempotencyEventType,
  type IdempotencySettings,
  isRequestInProgressError,
  LeaseLostError,
  RequestInProgressError,
  type TimerHandle,
} from '@idem/core';
import {
  answerClaim,
  type ClaimResult,
  type IdempotencyRecord,
  type ReplayedOutcome,
  type StoredOutcome,
  storedErrorOf,
  type UnclaimedClaim,
} from '@idem/core/store';
import { type SQL, sql } from 'drizzle-orm';
import { isConnectionError } from '../drizzle/connectionError.js';
import { drizzleStore } from '../drizzle/drizzleStore.js';
import { keyLockArgs } from '../drizzle/keyLock.js';
import type { PgDatabaseLike } from '../drizzle/PgDatabaseLike.js';
import { idempotencyKeys as keys } from '../drizzle/schema.js';
import { sqlLater, sqlNow } from '../drizzle/sqlTime.js';
import { transactionStores } from '../drizzle/transactionStores.js';

/** How long a transaction-mode duplicate waits on the key's lock with `inProgress: 'reject'`. */
export const DEFAULT_LOCK_WAIT_MS = 5_000;

/** The longest a duplicate waits on the key's lock under the engine's `inProgress`. */
export function lockWaitOf(settings: Pick<IdempotencySettings, 'inProgress'>): number {
  return settings.inProgress === 'reject' ? DEFAULT_LOCK_WAIT_MS : settings.inProgress.waitMs;
}

/** The handler's context in transaction mode: core's, plus the transaction it writes through. */
export interface TransactionContext<TTx> extends HandlerContext {
  tx: TTx;
}

/** How a call ended: its result, and whether it came from the store. */
export interface CallOutcome<TResult> {
  result: TResult;
  replayed: boolean;
}

/**
 * What becomes of a run's writes and its answer:
 * - `commit`: the writes commit with `value` stored as the answer;
 * - `undo`: the writes are rolled back, `value` is stored as the answer;
 * - `error`: the engine's error policy judges `error`: stored (writes rolled back) or released;
 * - `release`: everything is rolled back and nothing is stored; a retry runs again.
 */
export type Settlement =
  | { kind: 'commit'; value: unknown }
  | { kind: 'undo'; value: unknown }
  | { kind: 'error'; error: unknown }
  | { kind: 'release'; error?: unknown };

export interface TransactionCall<TResult> {
  scope: string;
  key: string;
  fingerprint: string;
  signal: AbortSignal;
  /** Runs the procedure or handler with its context. */
  run: (idempotency: TransactionContext<PgDatabaseLike>) => Promise<TResult>;
}

export interface TransactionModeConfig<TResult> {
  db: PgDatabaseLike;
  settings: IdempotencySettings;
  /** The longest a duplicate waits on the key's lock. */
  lockWaitMs: number;
  emit: (event: IdempotencyEvent) => void;
  /** Judges a run's result: what is stored, and whether its writes stay. */
  settle: (result: TResult) => Settlement;
  /** Turns a stored answer (from `answerClaim`) into the caller's result. */
  replay: (replayed: ReplayedOutcome) => TResult;
}

/** Postgres `lock_not_available`: `lock_timeout` ran out. */
const LOCK_NOT_AVAILABLE = '55P03';
/** Postgres `in_failed_sql_transaction`: a statement of this transaction failed before. */
const IN_FAILED_SQL_TRANSACTION = '25P02';
/** A duplicate that waited `lockWaitMs` in vain: the holder is slow, come back soon. */
const RETRY_AFTER_LOCK_WAIT_MS = 1_000;

/** A transient failure: leave the transaction by rolling all of it back. */
class Rollback<TResult> {
  constructor(
    readonly result: TResult,
    readonly error: unknown,
  ) {}
}

/** The duplicate already answered 409 while it waited for a connection: do nothing. */
class Abandoned {}

/**
 * Transaction mode, shared by the tRPC middleware and the Fetch handler: claim, procedure
 * (or handler) and completion in one transaction on `db`. Nothing here knows the caller's
 * result type: `settle` judges a result and `replay` rebuilds one from the store.
 *
 * Statements, in order:
 * 1. the key's record, read outside any transaction: a completed key (a replay or a
 *    mismatch) is answered from this one read, and nothing else runs
 * 2. `BEGIN`
 * 3. the claim, one statement: it takes the key's transaction-scoped advisory lock (a
 *    duplicate waits here, bounded by `lock_timeout`, set and put back within the statement),
 *    then inserts the key (a key that exists after all, a takeover or a duplicate that
 *    waited, costs the full claim after it)
 * 4. the procedure's own statements (only when claimed)
 * 5. the fenced completion `UPDATE`
 * 6. `COMMIT`, which frees the lock: a waiting duplicate then finds the completed key
 *
 * So inside the transaction the key costs two statements of its own, the claim and the
 * completion. A transient error rolls everything back (`ROLLBACK`), and the key is free
 * again. A deterministic error (or a stored refusal, `undo`) must roll back the
 * procedure's writes yet keep duplicates out until its answer is stored, or a duplicate
 * woken by the rollback would run the procedure a second time. There the holder takes the
 * same advisory lock at session level (its own lock: granted at once), rolls the
 * transaction back and opens the next at once (`ROLLBACK AND CHAIN`: the writes go, the
 * session lock stays), stores the answer there in one upsert and drops the session lock;
 * the driver's closing `COMMIT` commits the answer. (A transaction that one of the
 * procedure's own statements aborted can only roll back: then nothing is stored.) A crash
 * in between closes the connection, which frees the lock, and leaves nothing stored: a
 * retry runs again. So does a connection lost at any point, and after it nothing more is
 * sent on that connection, not even the driver's `ROLLBACK` (see
 * {@link endedWithItsConnection}). A replay is the read alone, never the procedure.
 */
export function transactionMode<TResult>(config: TransactionModeConfig<TResult>) {
  const { db, settings, lockWaitMs, emit, settle, replay } = config;
  const { serializer, errorPolicy, leaseMs, ttlMs, clock } = settings;
  // Autocommit reads, prepared once on `db`.
  const reader = drizzleStore(db);
  // The claim and completion, rendered once and run in each call's transaction.
  const storeIn = transactionStores(db, lockWaitMs);

  return async function runInTransaction(
    call: TransactionCall<TResult>,
  ): Promise<CallOutcome<TResult>> {
    const { scope, key, fingerprint } = call;
    const startedAt = clock.monotonicNow();
    const report = (type: IdempotencyEventType, version?: number, error?: unknown) => {
      const event: IdempotencyEvent = {
        type,
        scope,
        key,
        durationMs: clock.monotonicNow() - startedAt,
      };
      if (version !== undefined) event.version = version;
      if (error !== undefined) event.error = error;
      emit(event);
    };
    /** A replay, mismatch or in-progress answer: core's one claim-answer table. */
    const answered = (claim: UnclaimedClaim): CallOutcome<TResult> => {
      const replayed = answerClaim(claim, settings, (type) => report(type, claim.record.version));
      return { result: replay(replayed), replayed: true };
    };

    type Settled = { claim: UnclaimedClaim } | { ran: TResult };
    let settled: Settled;
    // The wait is bounded before the transaction starts too: PGlite has one connection, so
    // there a duplicate queues for the connection, not for the key's lock, and a pool that is
    // exhausted makes a Postgres duplicate queue the same way. lock_timeout covers the rest.
    let admitted = false;
    let abandoned = false;
    let admissionTimer: TimerHandle | undefined;
    const admission = new Promise<never>((_, reject) => {
      admissionTimer = clock.setTimeout(() => {
        if (admitted) return;
        abandoned = true;
        reject(new RequestInProgressError(scope, key, RETRY_AFTER_LOCK_WAIT_MS));
      }, lockWaitMs);
    });
    try {
      // The read queues for a connection too (PGlite's only one may be in a transaction).
      const reading = reader.get(scope, key);
      reading.catch(() => undefined);
      const existing = await Promise.race([reading, admission]);
      if (existing?.status === 'completed') {
        admitted = true;
        clock.clearTimeout(admissionTimer);
        return answered(
          existing.fingerprint === fingerprint
            ? { status: 'replay', record: existing }
            : { status: 'mismatch', record: existing },
        );
      }
      // Settles once the driver has ended the transaction, whether the callback has or not;
      // while the callback still runs, only a driver that lost the connection does that.
      let driverEnded: Promise<void> | undefined;
      let driverHasEnded = false;
      const claimAndRun = async (tx: PgDatabaseLike): Promise<Settled> => {
        admitted = true;
        clock.clearTimeout(admissionTimer);
        if (abandoned) throw new Abandoned();
        const store = storeIn(tx);
        let claim: ClaimResult;
        try {
          claim = await store.claim({ scope, key, fingerprint, leaseMs, ttlMs });
        } catch (error) {
          if (!hasCode(error, LOCK_NOT_AVAILABLE)) throw error;
          throw new RequestInProgressError(scope, key, RETRY_AFTER_LOCK_WAIT_MS, { cause: error });
        }
        if (claim.status !== 'claimed') return { claim };

        const { record } = claim;
        report(claim.takeover ? 'takeover' : 'claimed', record.version);
        const result = await call.run({
          key,
          scope,
          tx,
          signal: call.signal,
          attempt: record.attempts,
          version: record.version,
          takeover: claim.takeover,
          deriveKey: (suffix) => deriveKey(scope, key, suffix),
          step: async (_name, fn) => fn(),
        });
        // A procedure can carry on past a statement that lost the connection, or make an
        // answer of that failure: the driver has given the transaction up by then (its end
        // reaches here in fewer promise steps than the failed statement reaches the
        // procedure's answer), and idem's next statement would go to a closed socket (see
        // endedWithItsConnection).
        if (driverHasEnded) return parked<Settled>();
        const settlement = settle(result);
        if (settlement.kind === 'commit') {
          const value = serializer.serialize(settlement.value);
          await store.complete(record, { kind: 'success', value }, ttlMs);
          report('completed', record.version);
          return { ran: result };
        }
        if (settlement.kind === 'release') throw new Rollback(result, settlement.error);
        if (
          settlement.kind === 'error' &&
          (errorPolicy.classify(settlement.error) === 'release' ||
            // A failure that lost the connection lost the transaction with it: nothing is left
            // to store the answer in, and no statement may follow on that connection.
            (await endedWithItsConnection(settlement.error, driverEnded)))
        ) {
          throw new Rollback(result, settlement.error);
        }
        const outcome: StoredOutcome =
          settlement.kind === 'undo'
            ? { kind: 'success', value: serializer.serialize(settlement.value) }
            : {
                kind: 'error',
                error: storedErrorOf(errorPolicy, settlement.error, serializer).stored,
              };
        // A transaction one of the procedure's statements aborted can only roll back: nothing
        // is stored, and the caller gets the procedure's own answer (a retry runs again).
        if (!(await storeAfterRollback(tx, record, outcome, ttlMs))) {
          throw new Rollback(result, settlement.kind === 'error' ? settlement.error : undefined);
        }
        report(
          'completed',
          record.version,
          settlement.kind === 'error' ? settlement.error : undefined,
        );
        return { ran: result };
      };
      const work = db.transaction(async (tx) => {
        try {
          return await claimAndRun(tx);
        } catch (error) {
          if (driverHasEnded || (await endedWithItsConnection(error, driverEnded))) {
            return parked<Settled>();
          }
          throw error;
        }
      });
      const ended = () => {
        driverHasEnded = true;
      };
      driverEnded = work.then(ended, ended);
      settled = await Promise.race([work, admission]);
    } catch (error) {
      if (error instanceof Rollback) {
        report('released', undefined, error.error);
        return { result: error.result as TResult, replayed: false };
      }
      if (isRequestInProgressError(error)) report('in_progress');
      throw error;
    }

    if ('ran' in settled) return { result: settled.ran, replayed: false };
    // Only a lease-mode attempt leaves a committed in-progress row behind.
    return answered(settled.claim);
  };
}

/**
 * Rolls back the procedure's writes and stores `outcome` for the key `record` holds,
 * with duplicates kept out throughout (see {@link transactionMode}). Returns false, having
 * done nothing, when one of the procedure's statements aborted the transaction (only a
 * rollback can follow).
 *
 * `ROLLBACK AND CHAIN` ends the transaction and opens the next one on the same connection
 * at once; the upsert and the unlock run in that one, and the driver's `COMMIT` commits the
 * answer. The connection never sits outside a transaction, where a driver may take it back
 * to its pool (postgres-js does). A duplicate let in by the unlock waits for that commit on
 * the upserted row. The upsert writes the holder's version over whatever the rollback
 * brought back: nothing for a new key, the old row for a takeover, whose holder's fenced
 * completion then matches nothing.
 */
async function storeAfterRollback(
  tx: PgDatabaseLike,
  record: IdempotencyRecord,
  outcome: StoredOutcome,
  ttlMs: number,
): Promise<boolean> {
  const lock = keyLockArgs(record.scope, record.key);
  try {
    await send(tx, sql`select pg_advisory_lock(${lock})`);
  } catch (error) {
    if (hasCode(error, IN_FAILED_SQL_TRANSACTION)) return false;
    throw error;
  }
  let failure: { error: unknown } | undefined;
  try {
    await send(tx, sql.raw('rollback and chain'));
    const now = sqlNow(undefined);
    const stored = await tx
      .insert(keys)
      .values({
        scope: record.scope,
        key: record.key,
        fingerprint: record.fingerprint,
        status: 'completed',
        version: record.version,
        lockedUntil: null,
        attempts: record.attempts,
        outcome,
        steps: record.steps,
        createdAt: new Date(record.createdAt),
        completedAt: now,
        expiresAt: sqlLater(now, ttlMs),
      })
      .onConflictDoUpdate({
        target: [keys.scope, keys.key],
        set: {
          fingerprint: sql`excluded.fingerprint`,
          status: sql`excluded.status`,
          version: sql`excluded.version`,
          lockedUntil: sql`excluded.locked_until`,
          attempts: sql`excluded.attempts`,
          outcome: sql`excluded.outcome`,
          steps: sql`excluded.steps`,
          createdAt: sql`excluded.created_at`,
          completedAt: sql`excluded.completed_at`,
          expiresAt: sql`excluded.expires_at`,
        },
        setWhere: sql`${keys.version} < excluded.version`,
      })
      .returning({ version: keys.version });
    if (stored.length === 0) throw new LeaseLostError(record.scope, record.key, record.version);
  } catch (error) {
    // A lost connection took the transaction and the session lock with it, and a statement
    // sent on it now would crash the process (see endedWithItsConnection).
    if (isConnectionError(error)) throw error;
    failure = { error };
    // A failed statement aborts the chained transaction, where even the unlock would fail.
    const rolledBack = await send(tx, sql.raw('rollback and chain')).then(
      () => undefined,
      (rollbackError: unknown) => rollbackError,
    );
    if (isConnectionError(rolledBack)) throw rolledBack;
  }
  // A session lock outlives transactions: it must go whatever happened above, or the pooled
  // connection would keep the key locked. (If this fails, the connection is gone, and the
  // lock with it.)
  await send(tx, sql`select pg_advisory_unlock(${lock})`);
  if (failure) throw failure.error;
  return true;
}

/**
 * How long a transaction's callback, failed with a connection-level error, waits for the
 * driver to end the transaction by itself. postgres.js ends it in the same turn of the event
 * loop as it reports the error (see {@link endedWithItsConnection}); the wait runs out only
 * where the driver waits for the callback before it ends the transaction (Drizzle's
 * node-postgres session does) or where the connection was not lost after all (an 08 error
 * that dblink or postgres_fdw raised about another server): the callback then fails as any
 * other. It waits on the driver's I/O, so on the real timers, not on the engine's clock.
 */
const DRIVER_END_WAIT_MS = 100;

/**
 * Whether the transaction's callback failed because its connection is gone and the driver
 * has already ended the transaction without it: then the callback must never settle.
 *
 * postgres.js's `begin()` races the callback against the connection's close and rejects as
 * soon as the socket closes; but when the callback settles after that, it still sends
 * `rollback` (or `commit`) on that connection, whose socket is gone, and the driver throws
 * from the timer that would have written it (`TypeError: Cannot read properties of null
 * (reading 'write')`): an uncaughtException, which ends a process with Node's default
 * handlers. The write it failed also stays buffered, and every later reconnection of that
 * pooled connection stalls behind it until the connect timeout. The caller already has
 * `begin()`'s rejection, so a callback left pending loses nothing, and nothing refers to
 * it once the driver let go: it is collected with its transaction.
 *
 * Only a connection-level error (also as the cause of a released result) waits, so an
 * ordinary failure costs nothing. A failure the error policy would store asks here too
 * before anything is sent: with the connection gone it is released instead, and with the
 * connection still there (the wait ran out) it is stored as before.
 */
async function endedWithItsConnection(
  error: unknown,
  driverEnded: Promise<void> | undefined,
): Promise<boolean> {
  const cause = error instanceof Rollback ? error.error : error;
  if (!driverEnded || !isConnectionError(cause)) return false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), DRIVER_END_WAIT_MS);
  });
  try {
    return await Promise.race([driverEnded.then(() => true), waited]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise that never settles: see {@link endedWithItsConnection}. */
function parked<T>(): Promise<T> {
  return new Promise<T>(() => {});
}

/**
 * Sends a statement now. Drizzle queries are lazy: `then()` dispatches them, synchronously
 * down to the driver, so statements reach the transaction's connection in the order they
 * are sent here, whoever awaits them later (postgres-js pipelines them; PGlite queues them).
 */
function send(tx: PgDatabaseLike, query: SQL): Promise<unknown> {
  return tx.execute(query).then((result: unknown) => result);
}

/** A Postgres error code anywhere in the cause chain (Drizzle wraps driver errors). */
function hasCode(error: unknown, code: string): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if ((current as { code?: unknown }).code === code) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
