import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { defineEvents } from '../../src/outbox/defineEvents.js';
import {
  type ConsumerEvent,
  idempotentConsumer,
} from '../../src/outbox/inbox/idempotentConsumer.js';
import type { OutboxMessage, Publisher } from '../../src/outbox/OutboxMessage.js';
import type { PgDatabaseLike } from '../../src/postgres/PgDatabaseLike.js';
import { type BackendName, rows, type TestDatabase, useDatabase } from '../harness.js';

/** The events every outbox test publishes. */
export const events = defineEvents({
  'order.placed': z.object({ orderId: z.string(), totalCents: z.number().int().nonnegative() }),
  'order.shipped': z.object({ orderId: z.string(), carrier: z.enum(['dhl', 'ups']) }),
  'test.numbered': z.object({ n: z.number().int(), poison: z.boolean().optional() }),
});

/** A consumer-side table whose rows are the effects that must happen exactly once. */
export async function createEffectsTable(db: PgDatabaseLike): Promise<void> {
  await db.execute(
    sql.raw(
      'create table if not exists outbox_test_effects (' +
        'id bigint generated always as identity primary key, event_id text not null, note text)',
    ),
  );
}

/** Empties the outbox, the inbox and the effects table. */
export async function resetOutbox(db: PgDatabaseLike): Promise<void> {
  await createEffectsTable(db);
  await db.execute(sql`truncate idem_outbox, idem_inbox, outbox_test_effects restart identity`);
}

/**
 * A migrated database of `backend` for the enclosing `describe` (see `useDatabase`): call
 * the returned function in a test for the database with the outbox, the inbox and the
 * effects table emptied.
 */
export function useOutboxDatabase(backend: BackendName): () => Promise<TestDatabase> {
  const database = useDatabase(backend);
  return async () => {
    const opened = database();
    await resetOutbox(opened.db);
    return opened;
  };
}

/** An idempotent consumer (`billing` unless named) and every event it reported. */
export function reportingConsumer(db: PgDatabaseLike, name = 'billing') {
  const reported: ConsumerEvent[] = [];
  const consumer = idempotentConsumer({ db, name, onEvent: (event) => reported.push(event) });
  return { consumer, reported };
}

/** How many effect rows each event id has. */
export async function effectCounts(db: PgDatabaseLike): Promise<Map<string, number>> {
  const found = await rows<{ event_id: string; n: number | string }>(
    db,
    sql`select event_id, count(*) as n from outbox_test_effects group by event_id`,
  );
  return new Map(found.map((row) => [row.event_id, Number(row.n)]));
}

export interface OutboxRow {
  id: string;
  seq: number;
  topic: string;
  aggregate_key: string | null;
  attempts: number;
  last_error: string | null;
  sent: boolean;
  dead: boolean;
  locked: boolean;
  available_in_ms: number;
}

/** Every outbox row, in seq order, with times made relative to `nowMs`. */
export async function outboxRows(db: PgDatabaseLike, nowMs = Date.now()): Promise<OutboxRow[]> {
  const found = await rows<OutboxRow>(
    db,
    sql`select id::text as id, seq::float8 as seq, topic, aggregate_key, attempts, last_error,
          sent_at is not null as sent, dead_at is not null as dead, locked_by is not null as locked,
          (extract(epoch from available_at) * 1000 - ${nowMs}::float8)::float8 as available_in_ms
        from idem_outbox order by seq`,
  );
  return found.map((row) => ({
    ...row,
    seq: Number(row.seq),
    available_in_ms: Number(row.available_in_ms),
  }));
}

/** A publisher that records every publish, and can be told to fail or hang. */
export function recordingPublisher(
  behaviour: (message: OutboxMessage) => Promise<void> | void = () => {},
): Publisher & { published: OutboxMessage[]; counts: Map<string, number> } {
  const published: OutboxMessage[] = [];
  const counts = new Map<string, number>();
  return {
    published,
    counts,
    async publish(message) {
      await behaviour(message);
      published.push(message);
      counts.set(message.id, (counts.get(message.id) ?? 0) + 1);
    },
  };
}

/** Polls `condition` until it holds, failing after `timeoutMs`. Never a timing assertion. */
export async function waitFor(
  condition: () => Promise<boolean> | boolean,
  { timeoutMs = 4_000, intervalMs = 10, what = 'condition' } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
