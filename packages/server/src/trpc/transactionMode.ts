import {
  type ClaimResult,
  deriveKey,
  type IdempotencyEvent,
  type IdempotencySettings,
  isRequestInProgressError,
  KeyMismatchError,
  leaseTokenOf,
  RequestInProgressError,
  type TimerHandle,
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
 * 1. `BEGIN`
 * 2. bound `lock_timeout` ‖ the claim (one statement: insert the key, or read the existing
 *    record without locking it; a takeover adds a fenced UPDATE)
 * 3. restore `lock_timeout` ‖ `SAVEPOINT` (only when claimed)
 * 4. the procedure's own statements
 * 5. `RELEASE SAVEPOINT` ‖ the fenced completion `UPDATE`; after a deterministic error,
 *    `ROLLBACK TO SAVEPOINT` and then the completion that stores the error
 * 6. `COMMIT`; after a transient error `ROLLBACK` instead, and the key is free again
 *
 * The key costs the two statements DESIGN.md budgets (claim, completion); the lock bound
 * rides in the claim's round trip and the savepoint adds one. A replay runs 1, 2 and 6,
 * never the procedure.
 */
export function transactionMode(config: TransactionModeConfig) {
  const { db, settings, lockWaitMs, emit } = config;
  const { serializer, errorPolicy, leaseMs, ttlMs, clock } = settings;

  return async function runInTransaction<TResult extends ResultLike>(
    call: TransactionCall<TResult>,
  ): Promise<Answer<TResult>> {
    const { scope, key, fingerprint } = call;
    const startedAt = clock.now();
    const base = { scope, key };
    const durationMs = () => clock.now() - startedAt;

    let settled: { claim: Exclude<ClaimResult, { status: 'claimed' }> } | { ran: TResult };
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
      const work = db.transaction(async (tx) => {
        admitted = true;
        clock.clearTimeout(admissionTimer);
        if (abandoned) throw new Abandoned();
        const store = drizzleStore(tx);
        // Dispatched now and awaited with the claim: it reaches the connection first and
        // rides in the claim's round trip (pipelined), so the bound costs no wait of its own.
        const bounded = boundLockWait(tx, lockWaitMs);
        let claim: ClaimResult;
        try {
          [, claim] = await Promise.all([
            bounded,
            store.claim({ scope, key, fingerprint, leaseMs, ttlMs }),
          ]);
        } catch (error) {
          if (!hasCode(error, LOCK_NOT_AVAILABLE)) throw error;
          throw new RequestInProgressError(scope, key, RETRY_AFTER_LOCK_WAIT_MS, { cause: error });
        }
        if (claim.status !== 'claimed') return { claim };

        const { record } = claim;
        emit({
          type: claim.takeover ? 'takeover' : 'claimed',
          ...base,
          version: record.version,
          durationMs: durationMs(),
        });
        // The procedure's own statements keep the lock_timeout the app chose.
        await Promise.all([restoreLockWait(tx), send(tx, sql.raw(`savepoint ${SAVEPOINT}`))]);
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
        const token = leaseTokenOf(record);
        const done = { ...base, version: record.version };
        if (result.ok) {
          const value = serializer.serialize(result.data);
          const released = send(tx, sql.raw(`release savepoint ${SAVEPOINT}`));
          await Promise.all([released, store.complete(token, { kind: 'success', value }, ttlMs)]);
          emit({ type: 'completed', ...done, durationMs: durationMs() });
          return { ran: result };
        }
        if (errorPolicy.classify(result.error) === 'release') throw new Rollback(result);
        // In this order: the completion must not sit inside the savepoint it rolls back.
        await send(tx, sql.raw(`rollback to savepoint ${SAVEPOINT}`));
        const stored = errorPolicy.toStored(result.error, serializer);
        await store.complete(token, { kind: 'error', error: stored }, ttlMs);
        emit({ type: 'completed', ...done, durationMs: durationMs(), error: result.error });
        return { ran: result };
      });
      work.catch(() => undefined);
      settled = await Promise.race([work, admission]);
    } catch (error) {
      if (error instanceof Rollback) {
        const result = error.result as TResult & { ok: false };
        emit({ type: 'released', ...base, durationMs: durationMs(), error: result.error });
        return { result, replayed: false };
      }
      if (isRequestInProgressError(error)) {
        emit({ type: 'in_progress', ...base, durationMs: durationMs() });
      }
      throw error;
    }

    if ('ran' in settled) return { result: settled.ran, replayed: false };
    const { claim } = settled;
    const version = claim.record.version;
    switch (claim.status) {
      case 'mismatch':
        emit({ type: 'mismatch', ...base, version, durationMs: durationMs() });
        throw new KeyMismatchError(scope, key);
      case 'in_progress':
        // Only a lease-mode attempt leaves a committed in-progress row behind.
        emit({ type: 'in_progress', ...base, version, durationMs: durationMs() });
        throw new RequestInProgressError(
          scope,
          key,
          Math.min(claim.retryAfterMs, settings.inProgressRetryAfterMs),
        );
      case 'replay': {
        emit({ type: 'replayed', ...base, version, durationMs: durationMs() });
        const outcome = claim.record.outcome!;
        if (outcome.kind === 'success') {
          return {
            result: { ok: true, data: serializer.deserialize(outcome.value) },
            replayed: true,
          };
        }
        const error = getTRPCErrorFromUnknown(errorPolicy.fromStored(outcome.error, serializer));
        return { result: { ok: false, error }, replayed: true };
      }
    }
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

/**
 * Sets `lock_timeout` for the rest of the transaction, keeping the previous value in the
 * transaction-local setting `idem.lock_timeout` for {@link restoreLockWait}. The CTE is
 * materialized, so the previous value is read before `set_config` replaces it.
 *
 * Both statements are parameterless on purpose: postgres-js sends those with the simple
 * protocol and pipelines the next statement right behind them, while a parameterized
 * statement it has not prepared costs a describe round trip first and holds the pipeline.
 * The bound is a whole number this code computed, so it is safe to write inline.
 */
function boundLockWait(tx: PgDatabaseLike, lockWaitMs: number): Promise<unknown> {
  const bound = `'${Math.max(1, Math.ceil(lockWaitMs))}ms'`;
  return send(
    tx,
    sql.raw(
      "with previous as materialized (select current_setting('lock_timeout') as value) " +
        `select set_config('idem.lock_timeout', value, true), set_config('lock_timeout', ${bound}, true) from previous`,
    ),
  );
}

/** Puts back the `lock_timeout` that {@link boundLockWait} replaced. */
function restoreLockWait(tx: PgDatabaseLike): Promise<unknown> {
  return send(
    tx,
    sql.raw("select set_config('lock_timeout', current_setting('idem.lock_timeout'), true)"),
  );
}

/** A Postgres error code anywhere in the cause chain (Drizzle wraps driver errors). */
function hasCode(error: unknown, code: string): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if ((current as { code?: unknown }).code === code) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
