import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '../../store/IdempotencyStore.js';
import { CONTRACT_TTL_MS, claimRequest } from './storeContractCase.js';

export interface ServerClockSubject {
  /** The store, with no injected clock, and no record of `claimRequest()`'s key. */
  store: IdempotencyStore;
  /** "Now" on the clock the store reads (its server's), in milliseconds since the epoch. */
  serverNow(): Promise<number>;
  /** Runs after each test: close connections, drop data. */
  cleanup?: () => Promise<void>;
}

/** Builds a store on its server's clock for one test. */
export type ServerClockSetup = () => Promise<ServerClockSubject>;

/**
 * The cases of a store that reads "now" from its server (a database, Redis) rather than
 * from an injected clock, which `storeContract`, moving time by hand, cannot show: a claim
 * is stamped with the server's now, its lease and its expiry count from there, and another
 * claim of the key waits out the lease on that clock. Call it inside a vitest test file.
 */
export function serverClockContract(name: string, setup: ServerClockSetup): void {
  describe(`IdempotencyStore on its server's clock: ${name}`, () => {
    let subject: ServerClockSubject;

    beforeEach(async () => {
      subject = await setup();
    });
    afterEach(async () => {
      await subject.cleanup?.();
    });

    it("stamps a claim with the server's now and judges its lease by it", async () => {
      const { store, serverNow } = subject;
      const before = await serverNow();
      const claimed = await store.claim(claimRequest({ leaseMs: 60_000 }));
      const after = await serverNow();
      // A millisecond's slack: a server that keeps finer time may round "now" either way.
      expect(claimed.record.createdAt).toBeGreaterThanOrEqual(before - 1);
      expect(claimed.record.createdAt).toBeLessThanOrEqual(after);
      expect(claimed.record.lockedUntil).toBe(claimed.record.createdAt + 60_000);
      expect(claimed.record.expiresAt).toBe(claimed.record.createdAt + CONTRACT_TTL_MS);

      const again = await store.claim(claimRequest());
      expect(again.status).toBe('in_progress');
      const retryAfterMs = again.status === 'in_progress' ? again.retryAfterMs : -1;
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(60_000);
    });
  });
}
