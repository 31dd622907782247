import { defineEvents } from '@idem/server/outbox';
import type { PgDatabaseLike } from '@idem/server/postgres';
import { sql } from 'drizzle-orm';
import { integer, pgTable, timestamp, uuid } from 'drizzle-orm/pg-core';
import { z } from 'zod';

export const BENCH_TOPIC = 'bench.event' as const;

const benchSchemas = { [BENCH_TOPIC]: z.object({ n: z.number().int() }) };

/** The events the outbox benchmark produces (enqueue sends NOTIFY, the default). */
export const benchEvents = defineEvents(benchSchemas);

/**
 * The same events enqueued with `notify: false`, as the outbox pipelines do: NOTIFY
 * serialises the commits of notifying transactions, and their relays poll instead
 * (`minPollIntervalMs`).
 */
export const benchEventsWithoutNotify = defineEvents(benchSchemas, { notify: false });

/**
 * The consumer's own write, one row per handled event, deliberately without a unique
 * constraint: a duplicate delivery that got past the inbox would show up as two rows.
 */
export const benchConsumed = pgTable('bench_consumed', {
  eventId: uuid('event_id').notNull(),
  n: integer('n').notNull(),
  /** The event's `createdAt` (its outbox row's, by the database clock): relays delete rows. */
  createdAt: timestamp('created_at', { withTimezone: true }).notNull(),
  consumedAt: timestamp('consumed_at', { withTimezone: true })
    .notNull()
    .default(sql`clock_timestamp()`),
});

export const CREATE_CONSUMED_TABLE = `
  create table if not exists bench_consumed (
    event_id uuid not null,
    n integer not null,
    created_at timestamptz not null,
    consumed_at timestamptz not null default clock_timestamp()
  )`;

/**
 * The consumer's writes for a batch of fresh events: one INSERT, its rows as one JSON
 * parameter, prepared (what a batch handler should do: one statement per batch, not per
 * event, and the same text every time, so no parse or plan after the first).
 */
export async function recordConsumed(
  tx: PgDatabaseLike,
  events: readonly { id: string; payload: { n: number }; createdAt: Date }[],
): Promise<void> {
  const rows = JSON.stringify(
    events.map((event) => ({
      event_id: event.id,
      n: event.payload.n,
      created_at: event.createdAt,
    })),
  );
  // The select yields the table's columns in order.
  await tx
    .insert(benchConsumed)
    .select(
      sql`select event_id, n, created_at, clock_timestamp()
        from jsonb_to_recordset(${rows}::jsonb) as r(event_id uuid, n integer, created_at timestamptz)`,
    )
    .prepare('bench_record_consumed')
    .execute();
}

/** The consumer's name in `idem_inbox`. */
export const CONSUMER_NAME = 'bench';
