import { isConfigurationError } from '@idem/core';
import { manualClock } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/outbox/inbox/idempotentConsumer.js';
import { anotherClient, driverBackends, rows } from './harness.js';
import { effectCounts, reportingConsumer, useOutboxDatabase } from './outbox/fixtures.js';

const recordEffect =
  (eventId: string) =>
  async (tx: { execute: (query: ReturnType<typeof sql>) => Promise<unknown> }) => {
    await tx.execute(sql`insert into outbox_test_effects (event_id) values (${eventId})`);
    return eventId;
  };

for (const backend of driverBackends) {
  describe(`idempotentConsumer on ${backend}`, () => {
    const fresh = useOutboxDatabase(backend);

    it('runs the handler once per event id and reports the duplicates', async () => {
      const { db } = await fresh();
      const { consumer: billing, reported } = reportingConsumer(db);
      const event = { id: 'evt-1' };
      expect(await billing.handle(event, recordEffect(event.id))).toEqual({
        status: 'processed',
        value: 'evt-1',
      });
      expect(await billing.handle(event, recordEffect(event.id))).toEqual({ status: 'duplicate' });
      expect(await effectCounts(db)).toEqual(new Map([['evt-1', 1]]));
      expect(reported.map((entry) => entry.type)).toEqual(['processed', 'duplicate']);
      expect(reported[1]).toMatchObject({ consumer: 'billing', eventId: 'evt-1' });

      // Another consumer of the same event handles it for itself.
      const shipping = idempotentConsumer({ db, name: 'shipping' });
      expect((await shipping.handle(event, recordEffect(event.id))).status).toBe('processed');
    });

    it('rolls the inbox row back with a failing handler, so a redelivery runs it again', async () => {
      const { db } = await fresh();
      const { consumer: billing, reported } = reportingConsumer(db);
      const failure = new Error('downstream unavailable');
      await expect(
        billing.handle({ id: 'evt-2' }, async (tx) => {
          await recordEffect('evt-2')(tx);
          throw failure;
        }),
      ).rejects.toBe(failure);
      expect(await effectCounts(db)).toEqual(new Map());
      expect(reported).toMatchObject([{ type: 'failed', error: failure }]);
      expect((await billing.handle({ id: 'evt-2' }, recordEffect('evt-2'))).status).toBe(
        'processed',
      );
      expect(await effectCounts(db)).toEqual(new Map([['evt-2', 1]]));
    });

    it('handles 20 simultaneous copies of one event exactly once', async () => {
      const database = await fresh();
      // On a real server each copy gets its own connection, through the backend's driver,
      // as on separate consumer instances (PGlite's one connection is shared).
      const clients = Array.from({ length: 4 }, () => anotherClient(database, { max: 5 }));
      try {
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, index) =>
            idempotentConsumer({
              db: clients[index % 4]?.db ?? database.db,
              name: 'billing',
            }).handle({ id: 'evt-3' }, recordEffect('evt-3')),
          ),
        );
        expect(results.filter((result) => result.status === 'processed')).toHaveLength(1);
        expect(await effectCounts(database.db)).toEqual(new Map([['evt-3', 1]]));
      } finally {
        await Promise.all(clients.map((client) => client.close()));
      }
    });

    it('cleans up only its own rows older than retentionMs', async () => {
      const { db } = await fresh();
      const clock = manualClock(Date.now());
      const options = { db, clock, retentionMs: 60_000, maxRedeliveryDelayMs: 30_000 };
      const billing = idempotentConsumer({ ...options, name: 'billing' });
      const shipping = idempotentConsumer({ ...options, name: 'shipping' });
      await billing.handle({ id: 'old' }, async () => {});
      await shipping.handle({ id: 'old' }, async () => {});
      clock.advance(30_000);
      await billing.handle({ id: 'new' }, async () => {});
      clock.advance(30_001);
      expect(await billing.cleanup()).toBe(1);
      const left = await rows<{ consumer: string; event_id: string }>(
        db,
        sql`select consumer, event_id from idem_inbox order by consumer, event_id`,
      );
      expect(left).toEqual([
        { consumer: 'billing', event_id: 'new' },
        { consumer: 'shipping', event_id: 'old' },
      ]);
      // The cleaned-up event is not a duplicate any more: that is why retention must be long.
      expect((await billing.handle({ id: 'old' }, async () => {})).status).toBe('processed');
    });
  });
}

describe('idempotentConsumer start-up checks', () => {
  const db = {} as never;

  it('refuses a retention shorter than the longest redelivery delay, naming both', () => {
    let caught: unknown;
    try {
      idempotentConsumer({
        db,
        name: 'billing',
        retentionMs: 60_000,
        maxRedeliveryDelayMs: 120_000,
      });
    } catch (error) {
      caught = error;
    }
    expect(isConfigurationError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(
      /retentionMs \(60000 ms\).*maxRedeliveryDelayMs \(120000 ms\)/,
    );
    expect(() =>
      idempotentConsumer({ db, name: 'billing', retentionMs: 1_000, maxRedeliveryDelayMs: 1_000 }),
    ).toThrow(/longer than/);
  });

  it('accepts the defaults and refuses a missing name or an event without id', async () => {
    const consumer = idempotentConsumer({ db, name: 'billing' });
    expect(consumer.retentionMs).toBeGreaterThan(consumer.maxRedeliveryDelayMs);
    expect(() => idempotentConsumer({ db, name: '' })).toThrow(/name/);
    await expect(consumer.handle({ id: '' }, async () => {})).rejects.toThrow(/event's id/);
  });
});
