import { isConfigurationError } from '@idem/core';
import { manualClock } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { createInboxSweeper } from '../src/outbox/inbox/createInboxSweeper.js';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { backends, rows, useDatabase } from './harness.js';
import { resetOutbox } from './outbox/fixtures.js';

const MINUTE = 60_000;

for (const backend of backends) {
  describe(`inbox sweeper on ${backend}`, () => {
    const database = useDatabase(backend);

    it('deletes each consumer’s rows past its own retention, in small batches, on a schedule', async () => {
      const { db } = database();
      await resetOutbox(db);
      const clock = manualClock(Date.UTC(2026, 0, 1));
      // billing keeps rows 10 minutes, audit 30: the sweeper follows each one's rule.
      const billing = idempotentConsumer({
        db,
        clock,
        name: 'billing',
        retentionMs: 10 * MINUTE,
        maxRedeliveryDelayMs: MINUTE,
      });
      const audit = idempotentConsumer({
        db,
        clock,
        name: 'audit',
        retentionMs: 30 * MINUTE,
        maxRedeliveryDelayMs: MINUTE,
      });
      const handled = (prefix: string, count: number) =>
        Array.from({ length: count }, (_, n) => ({ id: `${prefix}-${n}` }));
      await billing.handleBatch(handled('old', 7), async () => {});
      await audit.handleBatch(handled('old', 7), async () => {});
      clock.advance(15 * MINUTE);
      await billing.handleBatch(handled('new', 3), async () => {});
      clock.advance(MINUTE);

      const timers = manualClock(0);
      const swept: number[] = [];
      const batches: number[] = [];
      const countingBilling = {
        ...billing,
        cleanup: async (options?: { limit?: number }) => {
          const deleted = await billing.cleanup(options);
          batches.push(deleted);
          return deleted;
        },
      };
      const sweeper = createInboxSweeper({
        consumers: [countingBilling, audit],
        batchSize: 3,
        intervalMs: MINUTE,
        clock: timers,
        onSweep: (deleted) => swept.push(deleted),
      });
      sweeper.start();
      sweeper.start(); // twice changes nothing
      await expect.poll(() => swept).toEqual([7]);
      // Batches of at most 3, until one comes back short.
      expect(batches).toEqual([3, 3, 1]);
      const left = async () =>
        (
          await rows<{ row: string }>(
            db,
            sql`select consumer || ':' || event_id as row from idem_inbox order by 1`,
          )
        ).map((found) => found.row);
      expect(await left()).toEqual([
        ...handled('old', 7).map((event) => `audit:${event.id}`),
        'billing:new-0',
        'billing:new-1',
        'billing:new-2',
      ]);

      // Past audit's 30 minutes (and billing's 10 for the new rows), the next scheduled
      // sweep takes the rest.
      clock.advance(15 * MINUTE);
      timers.advance(MINUTE);
      await expect.poll(() => swept).toEqual([7, 10]);
      await sweeper.stop();
      timers.advance(10 * MINUTE);
      expect(timers.pendingTimers()).toBe(0);
      expect(swept).toEqual([7, 10]);
      expect(await left()).toEqual([]);
      // sweepNow works while stopped.
      await billing.handle({ id: 'late' }, async () => {});
      expect(await sweeper.sweepNow()).toBe(0);
      clock.advance(10 * MINUTE + 1);
      expect(await sweeper.sweepNow()).toBe(1);
    });
  });
}

describe('createInboxSweeper start-up checks', () => {
  it('refuses no consumers and a batch size that cannot work, saying what to do', () => {
    const consumer = idempotentConsumer({ db: {} as never, name: 'billing' });
    let caught: unknown;
    try {
      createInboxSweeper({ consumers: [] });
    } catch (error) {
      caught = error;
    }
    expect(isConfigurationError(caught)).toBe(true);
    expect(String(caught)).toMatch(/at least one idempotentConsumer/);
    expect(() => createInboxSweeper({ consumers: [consumer], batchSize: 0 })).toThrow(
      /batchSize must be a positive integer; got 0/,
    );
    expect(() => createInboxSweeper({ consumers: [consumer], intervalMs: -1 })).toThrow(
      /intervalMs/,
    );
  });
});
