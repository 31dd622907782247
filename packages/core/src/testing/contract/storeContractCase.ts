import { expect } from 'vitest';
import { isLeaseLostError } from '../../errors/LeaseLostError.js';
import type { ClaimResult, IdempotencyStore } from '../../store/IdempotencyStore.js';
import {
  type ClaimRequest,
  type JsonValue,
  type LeaseToken,
  leaseTokenOf,
  type StoredOutcome,
} from '../../store/record.js';
import type { ManualClock } from '../manualClock.js';

/** The lease of a claim that {@link claimRequest} builds, unless it is given another. */
export const CONTRACT_LEASE_MS = 1_000;
/** The time to live of a claim that {@link claimRequest} builds, unless it is given another. */
export const CONTRACT_TTL_MS = 60_000;

/**
 * The claim the contract's cases send: key `key-1` in scope `user:1/orders.create` with
 * fingerprint `fp-a`, a lease of {@link CONTRACT_LEASE_MS} and a time to live of
 * {@link CONTRACT_TTL_MS}, each replaced by the field of `overrides` that names it.
 */
export function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: 'user:1/orders.create',
    key: 'key-1',
    fingerprint: 'fp-a',
    leaseMs: CONTRACT_LEASE_MS,
    ttlMs: CONTRACT_TTL_MS,
    ...overrides,
  };
}

/** The lease a claim won, for the fenced calls that follow; the test fails when it lost. */
export function claimedToken(result: ClaimResult): LeaseToken {
  expect(result.status).toBe('claimed');
  return leaseTokenOf(result.record);
}

const success = (value: JsonValue): StoredOutcome => ({
  kind: 'success',
  value,
});
const expectLeaseLost = async (promise: Promise<unknown>) => {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(isLeaseLostError(error), `expected LeaseLostError, got ${String(error)}`).toBe(true);
};

/** The helpers the contract's groups of cases share. */
export const contractHelpers = {
  request: claimRequest,
  tokenOf: claimedToken,
  success,
  expectLeaseLost,
};

/** What a case of the contract runs on: the store and clock made anew before each test. */
export interface ContractSubject {
  store: IdempotencyStore;
  clock: ManualClock;
}

/** What the contract's groups of cases share: the helpers, and a way to declare a case. */
export interface ContractCase extends Readonly<typeof contractHelpers> {
  /** Declares one case (vitest's `it`) whose body gets the test's store and clock. */
  it(name: string, body: (subject: ContractSubject) => Promise<void>): void;
}
