import type {
  ClaimRequest,
  IdempotencyRecord,
  JsonValue,
  LeaseToken,
  StoredOutcome,
} from './record.js';

/** The result of one atomic `claim`, one variant per row of the claim table. */
export type ClaimResult =
  /** The caller holds the key and must run the work. `takeover` when a lease had expired. */
  | { status: 'claimed'; record: IdempotencyRecord; takeover: boolean }
  /** The key completed before: hand back `record.outcome`, run nothing. */
  | { status: 'replay'; record: IdempotencyRecord }
  /** The key is in use with another payload's fingerprint. */
  | { status: 'mismatch'; record: IdempotencyRecord }
  /** Another holder's lease is alive; retry after `retryAfterMs`. */
  | { status: 'in_progress'; record: IdempotencyRecord; retryAfterMs: number };

export interface SweepOptions {
  /** The most rows to delete in this call, so no lock is held for long. */
  limit: number;
}

/**
 * Where keys live. Every method is one atomic step; implementations must pass
 * `storeContract` from `@idem/core/testing/contract`.
 *
 * **Time.** The store, not the engine, decides what "now" is: the engine passes only
 * durations (`leaseMs`, `ttlMs`). A database store reads the database's clock, so every
 * app server judges leases by one clock and skew between app servers cannot make one
 * of them take over a lease early. The memory store reads its injected `Clock`. A holder
 * judges its own view of its lease on its monotonic clock (`Clock.monotonicNow`), counted
 * from when it sent the claim, so a stepped wall clock cannot keep it running past its
 * lease; a holder that is paused or partitioned past its lease is fenced out by `version`
 * whatever its clock says.
 *
 * **Fencing.** `complete`, `release`, `heartbeat` and `saveStep` change the record only
 * while it is in progress with the token's `version` and `createdAt`; otherwise they throw
 * `LeaseLostError` and write nothing.
 *
 * **Values.** Outcomes and steps arrive as JSON from the engine's serializer. Strings in
 * them hold no U+0000 and no lone surrogates (`taggedJsonSerializer` tags such strings),
 * because Postgres `jsonb` cannot store those.
 */
export interface IdempotencyStore {
  /**
   * Atomically claims `(scope, key)`:
   * - no record, or an expired one → `claimed` (a new record, or the old one reset with
   *   version + 1 and no steps so that fencing tokens never repeat);
   * - another fingerprint → `mismatch`;
   * - completed → `replay`;
   * - in progress with a live lease → `in_progress` with the time left;
   * - in progress with an expired lease → `claimed` with version + 1 and `takeover: true`,
   *   keeping the recovery points.
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /** Stores the outcome and starts the record's TTL from now. Fenced. */
  complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void>;
  /**
   * Gives the key up after a transient failure: the lease ends now, so the next claim
   * takes over at once and resumes from the saved recovery points. Fenced.
   */
  release(token: LeaseToken): Promise<void>;
  /** Extends the lease to now + `leaseMs`. Fenced. */
  heartbeat(token: LeaseToken, leaseMs: number): Promise<void>;
  /** Saves a recovery point's result under `name`. Fenced. */
  saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void>;
  /** The record, or `null` when there is none or it has expired. */
  get(scope: string, key: string): Promise<IdempotencyRecord | null>;
  /** Deletes up to `limit` expired records; returns how many it deleted. */
  sweep(options: SweepOptions): Promise<number>;
}
