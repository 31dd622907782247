import { type Clock, LeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  type IdempotencyStore,
  isExpired,
  type LeaseToken,
} from '@idem/core/store';
import { is } from 'drizzle-orm';
import { PgTransaction } from 'drizzle-orm/pg-core';
import { GrantedLeases, retryLostConnection, WritePastLeaseError } from './lostConnectionRetry.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { prepareStatements } from './prepareStatements.js';
import {
  ClaimOrder,
  claim,
  completionValues,
  type FirstStatement,
  fixedOrder,
  incarnation,
  type StoreStatements,
  toRecord,
} from './storeClaim.js';
import { gatheredStatements, singleStatements } from './storeGathering.js';

export interface DrizzleStoreOptions {
  /**
   * Where "now" comes from for leases and expiry.
   *
   * By default the store reads the DATABASE clock (`statement_timestamp()`, to the
   * millisecond), so every app server judges leases by one clock and skew between app
   * servers cannot make one of them take over a live lease early. With a `clock` the store
   * uses that clock's `now()` instead, as the conformance tests do with a `manualClock`.
   * @default the database clock
   */
  clock?: Clock;
  /**
   * The longest a claim waits for another transaction that holds the key's row (transaction
   * mode: a duplicate waits for the first call to commit), in milliseconds; past it the
   * claim fails with Postgres' `lock_not_available` (55P03). Set inside the claim statement
   * itself (`lock_timeout`, transaction-local) and put back to the caller's value by the same
   * statement, so it costs no statement of its own and later statements keep the app's
   * setting.
   * @default undefined (Postgres' `lock_timeout`, unchanged)
   */
  lockWaitMs?: number;
  /**
   * The caller has just read that the key is not completed (as transaction mode does
   * before its transaction): every claim first tries a plain `INSERT … ON CONFLICT DO
   * NOTHING`, whatever the store's recent claims; when the key exists after all, it is
   * read and answered from the read where it needs no write (with `lockWaitMs`: the full
   * claim instead, which puts `lock_timeout` back).
   * @default false
   */
  expectNewKeys?: boolean;
}

/**
 * An `IdempotencyStore` on the `idem_keys` table, for any Drizzle Postgres database or
 * transaction (postgres-js, PGlite, node-postgres, …). Run `migrate(db)` first.
 *
 * Pass a transaction to make claims and completions part of it (transaction mode); pass
 * the database for autocommit statements (lease mode).
 *
 * Every statement is built once, when the store is made, with `sql.placeholder` for what
 * changes per call, and run as a named prepared query (`.prepare(name)`): no SQL is built on
 * the request path, and postgres-js prepares each statement once per connection and then
 * sends it in one round trip.
 *
 * Statements per call. A claim starts with the statement its store's recent claims make
 * cheapest (`ClaimOrder`: the last 16 or so, mostly new keys, mostly existing, or a mix):
 * - `claim` of a new key: one. Where claims are mostly of new keys (every request's first
 *   call), the new key's plain `INSERT … ON CONFLICT DO NOTHING`; otherwise the full claim,
 *   which inserts the key where no row has it or reads the existing row, with the
 *   statement's "now" (`readFirstClaim`); where claims are mostly of existing keys, a read
 *   that finds nothing comes first (two);
 * - `claim` of a completed, live in-progress or mismatched key (replay, mismatch, in
 *   progress): one read-only statement: a plain read where claims are mostly of existing
 *   keys (a burst of retries), else the full claim, which tries no insert for a key that
 *   exists (the transaction gets no id, writes no WAL, and its commit waits for no flush);
 *   where claims are mostly of new keys, the INSERT that found the key, then a plain read
 *   (two). core's `decideClaim` answers from the row either way;
 * - `claim` of an expired key or of a lapsed lease: the statements above (the read, or the
 *   full claim), then a conditional
 *   `UPDATE … WHERE version = <read> AND created_at = <read> AND <still expired or lapsed> RETURNING`.
 *   A concurrent claim that changed the row first makes it update nothing, and the claim
 *   starts over with the full claim (bounded); so does the full claim finding nothing (a
 *   concurrent insert it waited for, invisible to its snapshot);
 * - `complete`, `release`, `heartbeat`, `saveStep`: one `UPDATE` fenced by version,
 *   creation time and status; `get`: one read; `sweep`: one `DELETE`.
 *
 * On a database (not a transaction), the reads, new keys' `INSERT`s and completions asked
 * for during one turn of the event loop go out as one statement per kind
 * (`gatheredStatements`).
 *
 * On a database (not a transaction), a fenced `UPDATE` whose connection was lost is sent
 * again, fenced as before, on another connection while the lease lasts
 * (`retryLostConnection`): a completion whose connection died after the handler ran is
 * stored, not answered 500 with the key left to its lease.
 *
 * @example
 * const store = drizzleStore(drizzle(postgres(process.env.DATABASE_URL!)));
 */
export function drizzleStore(
  db: PgDatabaseLike,
  options: DrizzleStoreOptions = {},
): IdempotencyStore {
  return createDrizzleStore(db, options, false);
}

/** A fenced statement that changed no row: `token` no longer holds the key. */
export function throwIfFencedOut(updated: readonly unknown[], token: LeaseToken): void {
  if (updated.length === 0) throw new LeaseLostError(token.scope, token.key, token.version);
}

/** `lock_timeout` for a wait of `lockWaitMs`, as the claim statements bind it. */
export const lockTimeoutOf = (lockWaitMs: number) => `${Math.max(1, Math.ceil(lockWaitMs))}ms`;

/**
 * `drizzleStore`, and transaction mode's store (`keyLock`: its claim takes the key's lock).
 * `order` fixes which statement every claim starts with (the tests run each).
 */
export function createDrizzleStore(
  db: PgDatabaseLike,
  options: DrizzleStoreOptions,
  keyLock: boolean,
  order?: FirstStatement,
): IdempotencyStore {
  const { clock, lockWaitMs } = options;
  const statements = prepareStatements(db, clock, lockWaitMs !== undefined, keyLock);
  // The values every statement binds: the injected clock's "now", when there is one.
  const bind: StoreStatements['bind'] = (values) =>
    clock ? { ...values, now: new Date(clock.now()).toISOString() } : values;
  const onDatabase = !is(db, PgTransaction);
  const store: StoreStatements = {
    statements,
    sends: onDatabase ? gatheredStatements(statements, bind) : singleStatements(statements, bind),
    // A claim with a key lock or a bounded wait (transaction mode) always starts in full.
    order: order
      ? fixedOrder(order)
      : options.expectNewKeys === true
        ? fixedOrder('insert')
        : lockWaitMs === undefined && !keyLock
          ? new ClaimOrder()
          : fixedOrder('claim'),
    lockWait: lockWaitMs === undefined ? undefined : lockTimeoutOf(lockWaitMs),
    bind,
    // A transaction ends with its connection: only a store on a database retries.
    leases: onDatabase
      ? new GrantedLeases(clock ? () => clock.monotonicNow() : () => performance.now())
      : undefined,
  };
  const { leases } = store;
  const completion = { execute: store.sends.complete };
  return {
    claim: leases
      ? (request) => grantingClaim(store, leases, request)
      : (request) => claim(store, request),
    complete: (token, outcome, ttlMs) => {
      const values = completionValues(token, outcome, ttlMs);
      return fenced(store, completion, token, values, true);
    },
    release: (token) => fenced(store, statements.release(), token, incarnation(token)),
    async heartbeat(token, leaseMs) {
      const sentAt = leases?.now() ?? 0;
      await fenced(store, statements.heartbeat(), token, { ...incarnation(token), leaseMs });
      leases?.granted(token, sentAt, leaseMs);
    },
    // Name and value travel as parameters: a step name is data, never SQL text.
    saveStep: (token, name, value) =>
      fenced(store, statements.saveStep(), token, {
        ...incarnation(token),
        stepName: name,
        stepValue: JSON.stringify(value),
      }),
    async get(scope, key) {
      const row = await store.sends.read(scope, key);
      if (!row) return null;
      const record = toRecord(row);
      return isExpired(record, Number(row.nowMs)) ? null : record;
    },
    async sweep({ limit }) {
      if (!(limit >= 1)) return 0;
      const deleted = await statements.sweep().execute(store.bind({ limit: Math.floor(limit) }));
      return deleted.length;
    },
  };
}

/**
 * A claim whose lease is noted, from when it was sent, for retries of its fenced writes,
 * and that waits no longer than that lease (a pool waiting for a primary): one landing
 * later leaves the key in progress, held by nobody, until a retry takes it over.
 */
async function grantingClaim(
  store: StoreStatements,
  leases: GrantedLeases,
  request: ClaimRequest,
): Promise<ClaimResult> {
  const sentAt = leases.now();
  const result = await leases.within(
    sentAt + request.leaseMs,
    claim(store, request),
    () => new WritePastLeaseError(request.scope, request.key, 'the claim'),
  );
  if (result.status === 'claimed') leases.granted(result.record, sentAt, request.leaseMs);
  return result;
}

/**
 * One fenced UPDATE: changes the row only for the live holder of `token`, whose incarnation
 * `values` carries (`incarnation`, `completionValues`). On a database it is tried again when
 * its connection was lost (see `retryLostConnection`); a retried completion that changed
 * nothing asks whether an earlier try had committed.
 */
async function fenced(
  store: StoreStatements,
  statement: { execute(values: Record<string, unknown>): Promise<unknown[]> },
  token: LeaseToken,
  values: ReturnType<typeof incarnation> & Record<string, unknown>,
  completes = false,
): Promise<void> {
  const write = async (retry: boolean) => {
    const updated = await statement.execute(store.bind(values));
    if (updated.length === 0 && retry && completes && (await completedBy(store, token))) return;
    throwIfFencedOut(updated, token);
  };
  if (store.leases) await retryLostConnection(store.leases, token, write);
  else await write(false);
}

/**
 * Whether the key is completed by `token`'s own incarnation: only its holder completes
 * that version, so an earlier try of this completion committed and only its reply was lost.
 */
async function completedBy(store: StoreStatements, token: LeaseToken): Promise<boolean> {
  const [row] = await store.statements
    .read()
    .execute(store.bind({ scope: token.scope, key: token.key }));
  return (
    row?.status === 'completed' &&
    row.version === token.version &&
    row.createdAt.getTime() === token.createdAt
  );
}
