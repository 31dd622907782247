import {
  type ClaimRequest,
  type ClaimResult,
  claimedNew,
  decideClaim,
  type IdempotencyRecord,
  type LeaseToken,
  type StoredOutcome,
} from '@idem/core/store';
import type { GrantedLeases } from './lostConnectionRetry.js';
import type { prepareStatements } from './prepareStatements.js';
import type { IdempotencyKeyRow } from './schema.js';
import type { StoreSends } from './storeGathering.js';

/** One store's statements, and what it binds into each. */
export interface StoreStatements {
  statements: ReturnType<typeof prepareStatements>;
  /** The statements every call makes: gathered with their kind's others, on a database. */
  sends: StoreSends;
  /**
   * Which statement a claim sends first: whatever the store's recent claims suggest (a
   * `ClaimOrder`), or always the same one (`fixedOrder`: the new key's INSERT for
   * `expectNewKeys`, the full claim for transaction mode's).
   */
  order: FirstStatementOrder;
  lockWait: string | undefined;
  bind<T extends object>(values: T): T & { now?: string };
  /** The leases this store granted, on a database; none in a transaction (no retries). */
  leases: GrantedLeases | undefined;
}

/**
 * A claim only loops when the record changed under it: a concurrent claim inserted the key
 * after its snapshot, or took over or reset the row between its two statements.
 */
const MAX_CLAIM_ROUNDS = 100;

/** The statement a claim starts with. */
export type FirstStatement = 'insert' | 'read' | 'claim';

/** Picks each claim's first statement, and hears whether the claim found its key. */
export type FirstStatementOrder = Pick<ClaimOrder, 'next' | 'found'>;

/** Every claim starting with `first`, whatever the claims before it found. */
export const fixedOrder = (first: FirstStatement): FirstStatementOrder => ({
  next: () => first,
  found: () => {},
});

/** How fast a store's estimate follows what its claims find: about the last 16 claims. */
const FOLLOW = 1 / 16;
/** Below this share of claims that found their key, the next claim tries the INSERT first. */
const MOSTLY_NEW = 0.25;
/** Above it, the next claim reads the key first. */
const MOSTLY_EXISTING = 0.75;

/**
 * Which statement a store's next claim sends first, from the share of its recent claims
 * that found their key already there (a moving average over about the last 16).
 *
 * Every order answers every claim the same way; only what it costs differs:
 * - mostly new keys (every first call of a request): the new key's plain `INSERT … ON
 *   CONFLICT DO NOTHING`, the cheapest statement that claims a new key. A key that exists
 *   (a retry of a call that completed) is then read, and answered from that read when it is
 *   completed, mismatched or held (two statements), else claimed by the full claim;
 * - mostly keys that exist (a burst of retries, after an outage): a plain read, the cheapest
 *   statement that answers a replay, a mismatch or a live holder. A key it does not find,
 *   or finds expired or with a lapsed lease, is claimed by the full claim;
 * - a mix: the full claim, which inserts a new key or reads an existing one in one
 *   statement.
 *
 * A read answers only what the full claim would answer without writing (the row it finds
 * is completed or held, which only a claim after its expiry changes); every write still
 * goes through the INSERT, the full claim or the fenced take-over UPDATE of the row that was
 * read, each one atomic statement.
 */
export class ClaimOrder {
  #existing = 0;

  next(): FirstStatement {
    if (this.#existing < MOSTLY_NEW) return 'insert';
    return this.#existing > MOSTLY_EXISTING ? 'read' : 'claim';
  }

  /** Notes what a claim found: whether its key had a row. */
  found(existing: boolean): void {
    this.#existing += ((existing ? 1 : 0) - this.#existing) * FOLLOW;
  }
}

/**
 * The claim: a first statement picked by the store's `order` (the new key's INSERT, or a
 * read that answers a key that needs no write), then, where that did not settle it, the
 * full claim, which reads or inserts in one statement; a key that is expired or whose lease
 * lapsed is taken over by a fenced UPDATE of the row that was read (by the read or by the
 * full claim).
 */
export async function claim(store: StoreStatements, request: ClaimRequest): Promise<ClaimResult> {
  const { statements, bind, lockWait, order } = store;
  const values = bind(claimValues(request, lockWait));
  const first = order.next();
  if (first === 'insert') {
    const nowMs = await store.sends.insertNew(values);
    order.found(nowMs === undefined);
    if (nowMs !== undefined) return claimedNew(request, nowMs);
  }
  // A key that exists (the INSERT found it) or was read first: answered from a read where
  // it needs no write. Not after an INSERT with a bounded lock wait: its RETURNING puts
  // `lock_timeout` back only for a row it inserted, so the full claim must follow.
  if (first === 'read' || (first === 'insert' && !lockWait)) {
    const row = await store.sends.read(request.scope, request.key);
    if (first === 'read') order.found(row !== undefined);
    if (row) {
      const record = toRecord(row);
      const decision = decideClaim(record, request, Number(row.nowMs));
      if (decision.status !== 'claimed') return decision; // replay, mismatch, in progress
      // Expired, or its lease lapsed: taken over from this read, as from the full claim's.
      const taken = await takeOver(store, request, record);
      if (taken) return taken;
    }
  }
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    // Insert the key if it is new, else read the existing row, with the statement's "now".
    const [row] = await statements.claim().execute(values);
    // Nothing: a concurrent claim inserted the key after this statement's snapshot was
    // taken (ON CONFLICT waited for it to commit), or the key was swept in between.
    if (!row) continue;
    const { inserted, nowMs } = row;
    if (first === 'claim' && round === 0) order.found(inserted !== true);
    if (inserted === true) return claimedNew(request, Number(nowMs));
    const record = toRecord(row);
    const decision = decideClaim(record, request, Number(nowMs));
    if (decision.status !== 'claimed') return decision; // replay, mismatch, in progress
    const taken = await takeOver(store, request, record);
    if (taken) return taken;
    // Another claim (or the holder's heartbeat or completion) changed the row first.
  }
  throw new Error(
    `claim of idempotency key "${request.key}" did not settle after ${MAX_CLAIM_ROUNDS} rounds: ` +
      'the record kept changing between statements (is the database clock stepping back?)',
  );
}

/**
 * The fenced UPDATE that claims an expired key or a lapsed lease: only if the row is still
 * `record`, the incarnation that was read (undefined when another claim, or the holder's
 * heartbeat or completion, changed it first).
 */
async function takeOver(
  { statements, bind }: StoreStatements,
  request: ClaimRequest,
  record: IdempotencyRecord,
): Promise<ClaimResult | undefined> {
  const [claimed] = await statements
    .takeOver()
    .execute(bind({ ...claimValues(request), ...incarnation(record) }));
  if (!claimed) return undefined;
  const taken = toRecord(claimed);
  return { status: 'claimed', takeover: taken.attempts > 1, record: taken };
}

/*
 * The values of the statements every call sends (a claim, a completion) are each built as
 * one object literal, not merged from others with a spread (`{ ...incarnation(token),
 * outcome }`): such merges cost a new key's claim and completion almost a third of the
 * store's and the engine's JavaScript (16 µs → 11 µs in
 * `apps/bench/src/tools/pgEngineJs.ts`). The rarer statements (a take-over, a release, a
 * heartbeat, a recovery point) merge `incarnation` with theirs.
 */

/** A claim's values for the statements' placeholders; `lockWait` for a bounded wait. */
export const claimValues = (request: ClaimRequest, lockWait?: string) => ({
  scope: request.scope,
  key: request.key,
  fingerprint: request.fingerprint,
  leaseMs: request.leaseMs,
  ttlMs: request.ttlMs,
  lockWait,
});

/**
 * The placeholders that name one incarnation of a key: a lease token, or a row as read. Its
 * creation time is bound as epoch milliseconds, which the statements turn into their
 * timestamptz (`sqlInstant`).
 */
export const incarnation = (token: LeaseToken) => ({
  scope: token.scope,
  key: token.key,
  version: token.version,
  createdAt: token.createdAt,
});

/** A completion's values: the holder's incarnation, and the outcome it stores for `ttlMs`. */
export const completionValues = (token: LeaseToken, outcome: StoredOutcome, ttlMs: number) => ({
  scope: token.scope,
  key: token.key,
  version: token.version,
  createdAt: token.createdAt,
  outcome: JSON.stringify(outcome),
  ttlMs,
});

/** The record a row holds: its columns, read by name (other fields of the row are left). */
export function toRecord(row: IdempotencyKeyRow): IdempotencyRecord {
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
