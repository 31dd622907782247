import {
  answerClaim,
  type ClaimResult,
  deriveKey,
  type HandlerContext,
  type IdempotencyEvent,
  type IdempotencyEventType,
  type IdempotencySettings,
  isRequestInProgressError,
  type ReplayedOutcome,
  RequestInProgressError,
  storedErrorOf,
  type TimerHandle,
  type UnclaimedClaim,
} from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { drizzleStore } from '../drizzle/drizzleStore.js';
import type { PgDatabaseLike } from '../drizzle/PgDatabaseLike.js';

/** How long a transaction-mode duplicate waits on the row lock with `inProgress: 'reject'`. */
export const DEFAULT_LOCK_WAIT_MS = 5_000;

/** The longest a duplicate waits on the key's row lock under the engine's `inProgress`. */
export function lockWaitOf(settings: Pick<IdempotencySettings, 'inProgress'>): number {
  return settings.inProgress === 'reject' ? DEFAULT_LOCK_WAIT_MS : settings.inProgress.waitMs;
}

/** The handler's context in transaction mode: core's, plus the transaction it writes through. */
export interface TransactionContext<TTx> extends HandlerContext {
  tx: TTx;
}

/** How a call ended: its result, and whether it came from the store. */
export interface Answer<TResult> {
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
  /** The longest a duplicate waits on the key's row lock. */
  lockWaitMs: number;
  emit: (event: IdempotencyEvent) => void;
  /** Judges a run's result: what is stored, and whether its writes stay. */
  settle: (result: TResult) => Settlement;
  /** Turns a stored answer (from `answerClaim`) into the caller's result. */
  replay: (replayed: ReplayedOutcome) => TResult;
}

/** Postgres `lock_not_available`: `lock_timeout` ran out. */
const LOCK_NOT_AVAILABLE = '55P03';
/** A duplicate that waited `lockWaitMs` in vain: the holder is slow, come back soon. */
const RETRY_AFTER_LOCK_WAIT_MS = 1_000;
const SAVEPOINT = 'idem_procedure';

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
 * Statements, in order (`‖`: sent together, so postgres-js pipelines them on the
 * transaction's connection and the group costs the round trips of its slowest member):
 * 1. the key's record, read outside any transaction: a completed key (a replay or a
 *    mismatch) is answered from this one read, and nothing else runs
 * 2. `BEGIN`
 * 3. the claim (one statement: insert the key, or read the existing record without locking
 *    it; a takeover adds a fenced UPDATE). It bounds its own wait for a concurrent holder's
 *    row (`lock_timeout`, set and put back within the statement)
 * 4. `SAVEPOINT` ‖ the procedure's own statements (only when claimed)
 * 5. the fenced completion `UPDATE`; after a deterministic error (or a stored refusal,
 *    `undo`), `ROLLBACK TO SAVEPOINT` and then the completion that stores the answer
 * 6. `COMMIT`; after a transient error `ROLLBACK` instead, and the key is free again
 *
 * Inside the transaction the key costs the claim and the completion, plus the savepoint
 * that lets a deterministic error be stored with the procedure's writes rolled back while
 * the key stays held: without it a rollback would free the key to a waiting duplicate
 * before the error is stored, and the procedure would run twice. The savepoint rides in
 * the procedure's first round trip. A replay is the read alone, never the procedure.
 */
export function transactionMode<TResult>(config: TransactionModeConfig<TResult>) {
  const { db, settings, lockWaitMs, emit, settle, replay } = config;
  const { serializer, errorPolicy, leaseMs, ttlMs, clock } = settings;
  // Autocommit reads, prepared once on `db`.
  const reader = drizzleStore(db);

  return async function runInTransaction(call: TransactionCall<TResult>): Promise<Answer<TResult>> {
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
    const answered = (claim: UnclaimedClaim): Answer<TResult> => {
      const replayed = answerClaim(claim, settings, (type) => report(type, claim.record.version));
      return { result: replay(replayed), replayed: true };
    };

    let settled: { claim: UnclaimedClaim } | { ran: TResult };
    // The wait is bounded before the transaction starts too: PGlite has one connection, so
    // there a duplicate queues for the connection, not for the row lock, and a pool that is
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
      const work = db.transaction(async (tx) => {
        admitted = true;
        clock.clearTimeout(admissionTimer);
        if (abandoned) throw new Abandoned();
        const store = drizzleStore(tx, { lockWaitMs, expectNewKeys: true });
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
        // Dispatched now, awaited after the procedure: it reaches the connection before the
        // procedure's first statement and rides in its round trip.
        const savepoint = send(tx, sql.raw(`savepoint ${SAVEPOINT}`));
        savepoint.catch(() => undefined);
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
        await savepoint;
        const settlement = settle(result);
        if (settlement.kind === 'commit') {
          const value = serializer.serialize(settlement.value);
          await store.complete(record, { kind: 'success', value }, ttlMs);
          report('completed', record.version);
          return { ran: result };
        }
        if (settlement.kind === 'release') throw new Rollback(result, settlement.error);
        if (settlement.kind === 'error' && errorPolicy.classify(settlement.error) === 'release') {
          throw new Rollback(result, settlement.error);
        }
        // In this order: the completion must not sit inside the savepoint it rolls back.
        await send(tx, sql.raw(`rollback to savepoint ${SAVEPOINT}`));
        if (settlement.kind === 'undo') {
          const value = serializer.serialize(settlement.value);
          await store.complete(record, { kind: 'success', value }, ttlMs);
          report('completed', record.version);
          return { ran: result };
        }
        const { stored } = storedErrorOf(errorPolicy, settlement.error, serializer);
        await store.complete(record, { kind: 'error', error: stored }, ttlMs);
        report('completed', record.version, settlement.error);
        return { ran: result };
      });
      work.catch(() => undefined);
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
