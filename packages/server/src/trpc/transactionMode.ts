import {
  answerClaim,
  type ClaimResult,
  deriveKey,
  type IdempotencyEvent,
  type IdempotencyEventType,
  type IdempotencySettings,
  isRequestInProgressError,
  RequestInProgressError,
  storedErrorOf,
  type TimerHandle,
  type UnclaimedClaim,
} from '@idem/core';
import { getTRPCErrorFromUnknown, type TRPCError } from '@trpc/server';
import { type SQL, sql } from 'drizzle-orm';
import { drizzleStore } from '../drizzle/drizzleStore.js';
import type { PgDatabaseLike } from '../drizzle/PgDatabaseLike.js';
import type { TransactionIdempotency } from './IdempotentOptions.js';

/** The part of a tRPC middleware result that idem reads. */
export type ResultLike = { ok: true; data: unknown } | { ok: false; error: TRPCError };

/** How a call ended: its result, and whether it came from the store. */
export interface Answer<TResult> {
  result: TResult | ResultLike;
  replayed: boolean;
}

export interface TransactionCall<TResult extends ResultLike> {
  scope: string;
  key: string;
  fingerprint: string;
  signal: AbortSignal;
  /** Runs the procedure (tRPC's `next`) with `ctx.idempotency`. */
  run: (idempotency: TransactionIdempotency<PgDatabaseLike>) => Promise<TResult>;
}

export interface TransactionModeConfig {
  db: PgDatabaseLike;
  settings: IdempotencySettings;
  /** The longest a duplicate waits on the key's row lock. */
  lockWaitMs: number;
  emit: (event: IdempotencyEvent) => void;
}

/** Postgres `lock_not_available`: `lock_timeout` ran out. */
const LOCK_NOT_AVAILABLE = '55P03';
/** A duplicate that waited `lockWaitMs` in vain: the holder is slow, come back soon. */
const RETRY_AFTER_LOCK_WAIT_MS = 1_000;
const SAVEPOINT = 'idem_procedure';

/** A transient failure: leave the transaction by rolling all of it back. */
class Rollback<TResult> {
  constructor(readonly result: TResult) {}
}

/** The duplicate already answered 409 while it waited for a connection: do nothing. */
class Abandoned {}

/**
 * Transaction mode: claim, procedure and completion in one transaction on `db`.
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
 * 5. the fenced completion `UPDATE`; after a deterministic error, `ROLLBACK TO SAVEPOINT`
 *    and then the completion that stores the error
 * 6. `COMMIT`; after a transient error `ROLLBACK` instead, and the key is free again
 *
 * Inside the transaction the key costs the claim and the completion, plus the savepoint
 * that lets a deterministic error be stored with the procedure's writes rolled back while
 * the key stays held: without it a rollback would free the key to a waiting duplicate
 * before the error is stored, and the procedure would run twice. The savepoint rides in
 * the procedure's first round trip. A replay is the read alone, never the procedure.
 */
export function transactionMode(config: TransactionModeConfig) {
  const { db, settings, lockWaitMs, emit } = config;
  const { serializer, errorPolicy, leaseMs, ttlMs, clock } = settings;
  // Autocommit reads, prepared once on `db`.
  const reader = drizzleStore(db);

  return async function runInTransaction<TResult extends ResultLike>(
    call: TransactionCall<TResult>,
  ): Promise<Answer<TResult>> {
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
      return replayed.ok
        ? { result: { ok: true, data: replayed.value }, replayed: true }
        : { result: { ok: false, error: getTRPCErrorFromUnknown(replayed.error) }, replayed: true };
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
        if (result.ok) {
          const value = serializer.serialize(result.data);
          await store.complete(record, { kind: 'success', value }, ttlMs);
          report('completed', record.version);
          return { ran: result };
        }
        if (errorPolicy.classify(result.error) === 'release') throw new Rollback(result);
        // In this order: the completion must not sit inside the savepoint it rolls back.
        await send(tx, sql.raw(`rollback to savepoint ${SAVEPOINT}`));
        const { stored } = storedErrorOf(errorPolicy, result.error, serializer);
        await store.complete(record, { kind: 'error', error: stored }, ttlMs);
        report('completed', record.version, result.error);
        return { ran: result };
      });
      work.catch(() => undefined);
      settled = await Promise.race([work, admission]);
    } catch (error) {
      if (error instanceof Rollback) {
        const result = error.result as TResult & { ok: false };
        report('released', undefined, result.error);
        return { result, replayed: false };
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
