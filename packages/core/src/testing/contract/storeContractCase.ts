import { expect } from 'vitest';
import { isLeaseLostError } from '../../errors/LeaseLostError.js';
import type { ClaimRequest, ClaimResult, IdempotencyStore } from '../../store/IdempotencyStore.js';
import {
  type JsonValue,
  type LeaseToken,
  leaseTokenOf,
  type StoredOutcome,
} from '../../store/record.js';
import type { ManualClock } from '../manualClock.js';

export const LEASE_MS = 1_000;
export const TTL_MS = 60_000;

const request = (overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  scope: 'user:1/orders.create',
  key: 'key-1',
  fingerprint: 'fp-a',
  leaseMs: LEASE_MS,
  ttlMs: TTL_MS,
  ...overrides,
});
const tokenOf = (result: ClaimResult): LeaseToken => {
  expect(result.status).toBe('claimed');
  return leaseTokenOf(result.record);
};
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
export const contractHelpers = { request, tokenOf, success, expectLeaseLost };

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
