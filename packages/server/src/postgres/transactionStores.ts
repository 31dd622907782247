import { LeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  claimedNew,
  type IdempotencyStore,
  type LeaseToken,
  type StoredOutcome,
} from '@idem/core/store';
import { sql } from 'drizzle-orm';
import { hasCode } from './connectionError.js';
import { createDrizzleStore, lockTimeoutOf, throwIfFencedOut } from './drizzleStore.js';
import { once } from './once.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { prepareStatements } from './prepareStatements.js';
import { noRowRaised, renderedStatement } from './renderedStatement.js';
import { idempotencyKeys as keys } from './schema.js';
import { sqlEpochMs } from './sqlTime.js';
import { claimValues, completionValues } from './storeClaim.js';
import { IN_FAILED_SQL_TRANSACTION, TransactionAbortedError } from './TransactionAbortedError.js';

/** A store on one transaction, which can also send its completion without waiting for it. */
export interface TransactionStore extends IdempotencyStore {
  /**
   * `complete`, sent now: `pipelined` where the statement goes straight to postgres-js,
   * handed to the connection before this returns, so ahead of anything sent on the
   * transaction after it (its `COMMIT` included); elsewhere (another driver, a Drizzle
   * logger) Drizzle sends it when it gets to it, and `done` must settle before the
   * transaction ends. What fails before the statement is sent throws from this call.
   */
  sendCompletion(
    token: LeaseToken,
    outcome: StoredOutcome,
    ttlMs: number,
  ): { done: Promise<void>; pipelined: boolean };
}

/**
 * The stores transaction mode claims through, one per transaction (`storeIn(tx)`): new keys
 * expected (it has just read the key), the wait for a concurrent holder bounded by
 * `lockWaitMs`, and every claim first takes the key's transaction-scoped advisory lock
 * (`keyLockArgs`), in the claim statement itself. Duplicates queue on that lock, which the
 * holder can keep across a rollback (a session-level lock on the same key) while it
 * stores a deterministic error: the key's row alone would free them at the rollback.
 *
 * The two statements of the success path, the new key's `INSERT` and the completion, are
 * rendered once here, on `db`, and run on each transaction with its values
 * (`renderedStatement`): a store built on the transaction would build them anew for every
 * request. Everything else (a key that exists after all: a takeover, a duplicate that
 * waited) goes to a full store built on the transaction when first needed.
 */
export function transactionStores(
  db: PgDatabaseLike,
  lockWaitMs: number,
): (tx: PgDatabaseLike) => TransactionStore {
  const lockWait = lockTimeoutOf(lockWaitMs);
  const { unprepared } = prepareStatements(db, undefined, true, true);
  // The new key's creation time, the statement's "now", comes back as epoch milliseconds
  // (read through the selection below, not the table's columns); the rest of its record is
  // what core's `decideClaim` makes of a key that does not exist, claimed at that instant.
  const insertNew = once(() =>
    renderedStatement(
      'idem_tx_insert_new',
      unprepared.insertNew({
        createdAtMs: sqlEpochMs(sql`${keys.createdAt}`).as('created_at_ms'),
      }),
      { createdAtMs: sql<number>`created_at_ms`.mapWith(Number).as('created_at_ms') },
    ),
  );
  // A completion that finds no row fails within the statement, so that a COMMIT sent behind
  // it before its answer (transaction mode on postgres-js) rolls the handler's writes back.
  const complete = once(() =>
    renderedStatement(
      'idem_tx_complete',
      unprepared.complete(),
      { version: sql<number>`version`.as('version') },
      { rowRequired: true },
    ),
  );

  return (tx) => {
    let full: IdempotencyStore | undefined;
    // The new key's INSERT found the key: the full claim, without that INSERT again.
    const fullStore = () => {
      full ??= createDrizzleStore(tx, { lockWaitMs }, true);
      return full;
    };
    return {
      async claim(request: ClaimRequest): Promise<ClaimResult> {
        const [row] = await insertNew().execute(tx, claimValues(request, lockWait));
        if (!row) return fullStore().claim(request);
        return claimedNew(request, row.createdAtMs);
      },
      async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
        return fenced(token, complete().execute(tx, completionValues(token, outcome, ttlMs)));
      },
      sendCompletion(token, outcome, ttlMs) {
        const values = completionValues(token, outcome, ttlMs);
        const sent = complete().send(tx, values);
        if (sent) return { done: fenced(token, sent), pipelined: true };
        return { done: fenced(token, complete().execute(tx, values)), pipelined: false };
      },
      release: (token) => fullStore().release(token),
      heartbeat: (token, leaseMs) => fullStore().heartbeat(token, leaseMs),
      saveStep: (token, name, value) => fullStore().saveStep(token, name, value),
      get: (scope, key) => fullStore().get(scope, key),
      sweep: (options) => fullStore().sweep(options),
    };
  };
}

/**
 * A completion's answer: a `LeaseLostError` where it found no row (see `rowRequired`), a
 * `TransactionAbortedError` where a statement of the handler had aborted the transaction.
 */
function fenced(token: LeaseToken, updated: Promise<unknown[]>): Promise<void> {
  return updated.then(
    (rows) => throwIfFencedOut(rows, token),
    (error: unknown) => {
      if (hasCode(error, IN_FAILED_SQL_TRANSACTION))
        throw new TransactionAbortedError({ cause: error });
      if (!noRowRaised(error)) throw error;
      throw new LeaseLostError(token.scope, token.key, token.version, { cause: error });
    },
  );
}
