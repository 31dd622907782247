import { type Clock, LeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  claimedNew,
  decideClaim,
  type IdempotencyRecord,
  type IdempotencyStore,
  isExpired,
  type LeaseToken,
} from '@idem/core/store';
import { is } from 'drizzle-orm';
import { PgTransaction } from 'drizzle-orm/pg-core';
import { GrantedLeases, retryLostConnection, WritePastLeaseError } from './lostConnectionRetry.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { prepareStatements } from './prepareStatements.js';
import type { IdempotencyKeyRow } from './schema.js';

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
   * The caller has just read that the key is not completed (transaction mode's read
   * before its transaction): a claim first tries a plain `INSERT … ON CONFLICT DO NOTHING`,
   * a statement far cheaper to build than the full claim (which a store made for one
   * transaction builds on every request), and runs the full claim only when the key
   * exists after all.
   * @default false
   */
  expectNewKeys?: boolean;
}

/**
 * A claim only loops when the record changed under it: a concurrent claim inserted the key
 * after its snapshot, or took over or reset the row between its two statements.
 */
const MAX_CLAIM_ROUNDS = 100;

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
 * Statements per call:
 * - `claim` of a new key: one, which inserts the key where no row has it or reads the
 *   existing row, with the statement's "now" (`readFirstClaim`);
 * - `claim` of a completed, live in-progress or mismatched key (replay, in progress,
 *   mismatch): that same statement, read-only: it tries no insert, so the transaction gets
 *   no id, writes no WAL and its commit waits for no flush. core's `decideClaim` answers;
 * - `claim` of an expired key or of a lapsed lease: that statement, plus a conditional
 *   `UPDATE … WHERE version = <read> AND created_at = <read> AND <still expired or
 *   lapsed> RETURNING`. A concurrent claim that changed the row first makes it update
 *   nothing, and the claim starts over (bounded); so does the first statement finding
 *   nothing (a concurrent insert it waited for, invisible to its snapshot);
 * - `complete`, `release`, `heartbeat`, `saveStep`: one `UPDATE` fenced by version,
 *   creation time and status; `get`: one read; `sweep`: one `DELETE`.
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

export function createDrizzleStore(
  db: PgDatabaseLike,
  options: DrizzleStoreOptions,
  keyLock: boolean,
): IdempotencyStore {
  const { clock, lockWaitMs } = options;
  const store: StoreStatements = {
    statements: prepareStatements(db, clock, lockWaitMs !== undefined, keyLock),
    expectNewKeys: options.expectNewKeys === true,
    lockWait: lockWaitMs === undefined ? undefined : lockTimeoutOf(lockWaitMs),
    // The values every statement binds: the injected clock's "now", when there is one.
    bind: (values) => (clock ? { ...values, now: new Date(clock.now()).toISOString() } : values),
    // A transaction ends with its connection: only a store on a database retries.
    leases: is(db, PgTransaction)
      ? undefined
      : new GrantedLeases(clock ? () => clock.monotonicNow() : () => performance.now()),
  };
  const { statements, leases } = store;
  return {
    claim: leases
      ? (request) => grantingClaim(store, leases, request)
      : (request) => claim(store, request),
    complete: (token, outcome, ttlMs) => {
      const values = { outcome: JSON.stringify(outcome), ttlMs };
      return fenced(store, statements.complete(), token, values, true);
    },
    release: (token) => fenced(store, statements.release(), token),
    async heartbeat(token, leaseMs) {
      const sentAt = leases?.now() ?? 0;
      await fenced(store, statements.heartbeat(), token, { leaseMs });
      leases?.granted(token, sentAt, leaseMs);
    },
    // Name and value travel as parameters: a step name is data, never SQL text.
    saveStep: (token, name, value) =>
      fenced(store, statements.saveStep(), token, {
        stepName: name,
        stepValue: JSON.stringify(value),
      }),
    async get(scope, key) {
      const [row] = await statements.read().execute(store.bind({ scope, key }));
      if (!row) return null;
      const { nowMs, ...columns } = row;
      const record = toRecord(columns);
      return isExpired(record, Number(nowMs)) ? null : record;
    },
    async sweep({ limit }) {
      if (!(limit >= 1)) return 0;
      const deleted = await statements.sweep().execute(store.bind({ limit: Math.floor(limit) }));
      return deleted.length;
    },
  };
}

/** One store's statements, and what it binds into each. */
interface StoreStatements {
  statements: ReturnType<typeof prepareStatements>;
  expectNewKeys: boolean;
  lockWait: string | undefined;
  bind<T extends object>(values: T): T & { now?: string };
  /** The leases this store granted, on a database; none in a transaction (no retries). */
  leases: GrantedLeases | undefined;
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
 * The claim: the new key's INSERT first where new keys are expected, else (and when the
 * key exists after all) statement 1 reads or inserts, and a key that is expired or whose
 * lease lapsed is taken over by a fenced UPDATE of the row that was read.
 */
async function claim(store: StoreStatements, request: ClaimRequest): Promise<ClaimResult> {
  const { statements, bind, lockWait } = store;
  const values = bind({ ...claimValues(request), ...(lockWait && { lockWait }) });
  if (store.expectNewKeys) {
    const [row] = await statements.insertNew().execute(values);
    if (row) {
      const { restored: _, ...columns } = row;
      return { status: 'claimed', takeover: false, record: toRecord(columns) };
    }
  }
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    // Insert the key if it is new, else read the existing row, with the statement's "now".
    const [row] = await statements.claim().execute(values);
    // Nothing: a concurrent claim inserted the key after this statement's snapshot was
    // taken (ON CONFLICT waited for it to commit), or the key was swept in between.
    if (!row) continue;
    const { inserted, nowMs, restored: _, ...columns } = row;
    if (inserted === true) return claimedNew(request, Number(nowMs));
    const record = toRecord(columns);
    const decision = decideClaim(record, request, Number(nowMs));
    if (decision.status !== 'claimed') return decision; // replay, mismatch, in progress
    const [claimed] = await statements.takeOver().execute(
      // Only if it is still the row that was read.
      bind({ ...claimValues(request), ...incarnation(record) }),
    );
    if (claimed) {
      const taken = toRecord(claimed);
      return { status: 'claimed', takeover: taken.attempts > 1, record: taken };
    }
    // Another claim (or the holder's heartbeat or completion) changed the row first.
  }
  throw new Error(
    `claim of idempotency key "${request.key}" did not settle after ${MAX_CLAIM_ROUNDS} rounds: ` +
      'the record kept changing between statements (is the database clock stepping back?)',
  );
}

/**
 * One fenced UPDATE: changes the row only for the live holder of `token`. On a database it
 * is tried again when its connection was lost (see `retryLostConnection`); a retried
 * completion that changed nothing asks whether an earlier try had committed.
 */
async function fenced(
  store: StoreStatements,
  statement: { execute(values: Record<string, unknown>): Promise<unknown[]> },
  token: LeaseToken,
  values: Record<string, unknown> = {},
  completes = false,
): Promise<void> {
  const write = async (retry: boolean) => {
    const updated = await statement.execute(store.bind({ ...values, ...incarnation(token) }));
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

/** A claim's values for the statements' placeholders. */
export const claimValues = (request: ClaimRequest) => ({
  scope: request.scope,
  key: request.key,
  fingerprint: request.fingerprint,
  leaseMs: request.leaseMs,
  ttlMs: request.ttlMs,
});

/** The placeholders that name one incarnation of a key: a lease token, or a row as read. */
export const incarnation = (token: LeaseToken) => ({
  scope: token.scope,
  key: token.key,
  version: token.version,
  createdAt: new Date(token.createdAt).toISOString(),
});

function toRecord(row: IdempotencyKeyRow): IdempotencyRecord {
  return {
    scope: row.scope,
    key: row.key,
    fingerprint: row.fingerprint,
    status: row.status,
    version: row.version,
    lockedUntil: row.lockedUntil ? row.lockedUntil.getTime() : null,
    attempts: row.attempts,
    outcome: row.outcome ?? null,
    steps: row.steps,
    createdAt: row.createdAt.getTime(),
    completedAt: row.completedAt ? row.completedAt.getTime() : null,
    expiresAt: row.expiresAt.getTime(),
  };
}
