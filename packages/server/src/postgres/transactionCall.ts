import {
  type Attempt,
  type IdempotencyEventType,
  type IdempotencySettings,
  RequestInProgressError,
  type RunResult,
} from '@idem/core';
import { answerClaim, type IdempotencyStore, type UnclaimedClaim } from '@idem/core/store';
import type { Admission } from './admission.js';
import type { DriverHold } from './driverEnd.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import type { OpenTransaction } from './pipelinedTransaction.js';
import type { TransactionStore } from './transactionStores.js';

/** One keyed call: who asks, its key, and the fingerprint binding the key to the request. */
export interface TransactionCall {
  scope: string;
  key: string;
  fingerprint: string;
  signal: AbortSignal;
}

/** A duplicate that waited `lockWaitMs` in vain: the holder is slow, come back soon. */
const RETRY_AFTER_LOCK_WAIT_MS = 1_000;

/**
 * How the transaction ends when the key is not to be kept: everything rolls back. Drizzle
 * rolls a transaction back only when its callback throws, so this is thrown, and caught
 * around `db.transaction` as the call's result.
 */
export class Rollback<T> {
  constructor(
    readonly result: RunResult<T>,
    /** The key is released by this rollback (reported so): with the failure, if one was. */
    readonly released: { error: unknown } | undefined,
  ) {}
}

/** The duplicate already answered 409 while it waited for a connection: do nothing. */
export class Abandoned {}

/**
 * What the transaction came to: a key someone else holds or finished, or this call's result;
 * with `completion` when the completion was sent with the COMMIT right behind it, its answer
 * still to come (see `settle`).
 */
export type Settled<T> =
  | { claim: UnclaimedClaim }
  | {
      result: RunResult<T>;
      /** A completion sent with the COMMIT, not yet answered: it settles once stored. */
      completion?: Promise<void>;
      /**
       * The stored version. Its 'completed' event is told once the transaction has
       * committed: a COMMIT that fails (a deferred constraint, a lost connection) stored
       * nothing.
       */
      version: number;
      /** The error a stored failure answers with, for the event. */
      error?: unknown;
      /**
       * The answer was stored after the handler's writes were rolled back
       * (`storeAfterRollback`): the COMMIT holds idem's write alone, so a COMMIT refused
       * there is the store's failure, not the handler's.
       */
      afterRollback?: true;
    };

/** The database a transaction-mode runner works on, with what it built on it once. */
export interface Opened {
  db: PgDatabaseLike;
  /** Opens a call's transaction (see `transactionOpener`). */
  begin: OpenTransaction;
  reader: IdempotencyStore;
  storeIn: (tx: PgDatabaseLike) => TransactionStore;
}

/** One call's state, shared by the steps below. */
export interface CallState {
  call: TransactionCall;
  settings: IdempotencySettings;
  database: Opened;
  report(type: IdempotencyEventType, version?: number, error?: unknown): void;
  admission: Admission;
  /**
   * Whether the driver has ended the transaction, and a promise that settles when it has,
   * whether the callback has or not: while the callback still runs, only a driver that
   * lost the connection does that.
   */
  driver: DriverHold;
}

/** A replay, mismatch or in-progress answer: core's one claim-answer table. */
export function answered(state: CallState, claim: UnclaimedClaim) {
  return answerClaim(claim, state.settings, (type) => state.report(type, claim.record.version));
}

/** A duplicate that waited `lockWaitMs` in vain: the holder is slow, come back soon. */
export function busy(state: CallState, cause?: unknown): RunResult<never> {
  state.report('in_progress');
  const { scope, key } = state.call;
  const error = new RequestInProgressError(scope, key, RETRY_AFTER_LOCK_WAIT_MS, { cause });
  return { ok: false, replayed: false, error };
}

/** The lease and retention a claim is made with. */
export function claimTerms({ leaseMs, ttlMs }: IdempotencySettings) {
  return { leaseMs, ttlMs };
}

/** What an answer is kept as: `stored` when the attempt names it, else its value. */
export function storedOf(attempt: Extract<Attempt<unknown>, { ok: true }>): unknown {
  return 'stored' in attempt ? attempt.stored : attempt.value;
}
