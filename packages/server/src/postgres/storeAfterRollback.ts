import { LeaseLostError } from '@idem/core';
import type { IdempotencyRecord, StoredOutcome } from '@idem/core/store';
import { type SQL, sql } from 'drizzle-orm';
import { hasCode, isConnectionError } from './connectionError.js';
import { keyLockArgs } from './keyLock.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { idempotencyKeys as keys } from './schema.js';
import { sqlLater, sqlNow } from './sqlTime.js';
import { IN_FAILED_SQL_TRANSACTION } from './TransactionAbortedError.js';

/**
 * Rolls back the procedure's writes and stores `outcome` for the key `record` holds,
 * with duplicates kept out throughout (see `transactionMode`). Returns false, having
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
export async function storeAfterRollback(
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
    // sent on it now would crash the process (see `endedWithItsConnection`).
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
 * Sends a statement now. Drizzle queries are lazy: `then()` dispatches them, synchronously
 * down to the driver, so statements reach the transaction's connection in the order they
 * are sent here, whoever awaits them later (postgres-js pipelines them; PGlite queues them).
 */
function send(tx: PgDatabaseLike, query: SQL): Promise<unknown> {
  return tx.execute(query).then((result: unknown) => result);
}
