import { afterEach, beforeEach, describe, it } from 'vitest';
import type { IdempotencyStore } from '../../store/IdempotencyStore.js';
import { type ManualClock, manualClock } from '../manualClock.js';
import { type ContractCase, contractHelpers } from './storeContractCase.js';
import { claimTableCases } from './storeContractClaim.js';
import { fencingCases } from './storeContractFencing.js';
import { isolationCases, payloadCases, sweepCases } from './storeContractKeeping.js';

export interface StoreContractSubject {
  store: IdempotencyStore;
  /** Runs after each test: close connections, drop data. */
  cleanup?: () => Promise<void>;
}

/**
 * Builds a store for one test. It must read time from `clock` and start with no keys.
 */
export type StoreContractSetup = (clock: ManualClock) => Promise<StoreContractSubject>;

/**
 * The conformance suite every `IdempotencyStore` must pass: each row of the claim table,
 * fencing, takeover, TTL, sweeping, concurrency, isolation and payload fidelity.
 * Call it inside a vitest test file: `storeContract('my store', async (clock) => …)`.
 */
export function storeContract(name: string, setup: StoreContractSetup): void {
  describe(`IdempotencyStore contract: ${name}`, () => {
    let clock: ManualClock;
    let subject: StoreContractSubject;

    beforeEach(async () => {
      clock = manualClock(Date.UTC(2026, 0, 1, 12));
      subject = await setup(clock);
    });
    afterEach(async () => {
      await subject.cleanup?.();
    });

    const t: ContractCase = {
      ...contractHelpers,
      it: (caseName, body) => it(caseName, () => body({ store: subject.store, clock })),
    };
    claimTableCases(t);
    fencingCases(t);
    sweepCases(t);
    isolationCases(t);
    payloadCases(t);
  });
}
