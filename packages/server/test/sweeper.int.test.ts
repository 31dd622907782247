import { leaseTokenOf } from '@idem/core/store';
import { manualClock } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { drizzleStore } from '../src/postgres/drizzleStore.js';
import { createSweeper, sweepExpired } from '../src/postgres/sweeper.js';
import { backends, rows, useDatabase } from './harness.js';

const LEASE_MS = 1_000;
const TTL_MS = 10_000;

for (const backend of backends) {
  describe(`sweeper on ${backend}`, () => {
    const database = useDatabase(backend);

    /** `expired` completed keys, `live` completed keys that are still young, one running key. */
    const seed = async (expired: number, live: number) => {
      await database().truncate();
      const clock = manualClock(Date.UTC(2026, 0, 1));
      const store = drizzleStore(database().db, { clock });
      const complete = async (key: string, ttlMs: number) => {
        const claim = await store.claim({
          scope: 's',
          key,
          fingerprint: 'f',
          leaseMs: LEASE_MS,
          ttlMs,
        });
        await store.complete(leaseTokenOf(claim.record), { kind: 'success', value: key }, ttlMs);
      };
      await Promise.all(
        Array.from({ length: expired }, (_, index) => complete(`old-${index}`, TTL_MS)),
      );
      await Promise.all(
        Array.from({ length: live }, (_, index) => complete(`new-${index}`, TTL_MS * 10)),
      );
      await store.claim({
        scope: 's',
        key: 'running',
        fingerprint: 'f',
        leaseMs: TTL_MS * 2,
        ttlMs: TTL_MS,
      });
      clock.advance(TTL_MS);
      return { clock, store };
    };
    const remaining = async () =>
      (await rows<{ key: string }>(database().db, sql`select key from idem_keys order by key`)).map(
        (row) => row.key,
      );

    it('deletes every expired key in batches and nothing else', async () => {
      const { store } = await seed(25, 3);
      const batches: number[] = [];
      const counting = {
        ...store,
        sweep: async (options: { limit: number }) => {
          const deleted = await store.sweep(options);
          batches.push(deleted);
          return deleted;
        },
      };
      expect(await sweepExpired({ store: counting, batchSize: 10 })).toBe(25);
      expect(batches).toEqual([10, 10, 5]);
      expect(await remaining()).toEqual(['new-0', 'new-1', 'new-2', 'running']);
    });

    it('stops after maxBatches', async () => {
      const { store } = await seed(25, 0);
      expect(await sweepExpired({ store, batchSize: 10, maxBatches: 1 })).toBe(10);
      expect((await remaining()).length).toBe(16);
    });

    it('runs on a schedule, never overlapping, and stop() waits for the sweep in hand', async () => {
      const { store } = await seed(12, 1);
      const timers = manualClock();
      const swept: number[] = [];
      const sweeper = createSweeper({
        store,
        batchSize: 5,
        intervalMs: 1_000,
        clock: timers,
        onSweep: (deleted) => swept.push(deleted),
      });
      sweeper.start();
      sweeper.start();
      await expect.poll(() => swept).toEqual([12]);
      timers.advance(1_000);
      await expect.poll(() => swept).toEqual([12, 0]);
      await sweeper.stop();
      timers.advance(10_000);
      expect(timers.pendingTimers()).toBe(0);
      expect(swept).toEqual([12, 0]);
      expect(await remaining()).toEqual(['new-0', 'running']);
    });

    it('refuses a batch size that cannot work', async () => {
      await expect(sweepExpired({ db: database().db, batchSize: 0 })).rejects.toThrow(
        /batchSize must be a positive integer; got 0/,
      );
    });
  });
}
