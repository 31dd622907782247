import { sql } from 'drizzle-orm';
import {
  bigint,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { instant } from '../postgres/sqlTime.js';

/**
 * The transactional outbox: one row per event, written by `enqueue` in the business
 * transaction and published by relays. A relay deletes a row once it is published (or
 * marks it sent and keeps it for `retainSentMs`); a dead-lettered row stays until it is
 * re-driven. Migration 0003 sets the table's fillfactor to 40, so that the claim's lease
 * (an update of unindexed columns) is a HOT update that writes no index entries.
 */
export const outboxEvents = pgTable(
  'idem_outbox',
  {
    /** Insertion order; `ordered` relays publish one aggregate's events in this order. */
    seq: bigint('seq', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    /** The event id consumers deduplicate by, and the broker's message id. */
    id: uuid('id').notNull().default(sql`gen_random_uuid()`),
    topic: text('topic').notNull(),
    aggregateKey: text('aggregate_key'),
    payload: jsonb('payload').notNull(),
    headers: jsonb('headers').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    createdAt: instant('created_at').notNull().defaultNow(),
    /** Not published before this time: the next try after a failure. */
    availableAt: instant('available_at').notNull().defaultNow(),
    /** Failed publish attempts that count towards dead-lettering. */
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    /** The claim lease: a relay that crashed gives its rows back when this passes. */
    lockedUntil: instant('locked_until'),
    /** The claim token of the relay batch holding the lease (fences late writes). */
    lockedBy: text('locked_by'),
    sentAt: instant('sent_at'),
    deadAt: instant('dead_at'),
  },
  (table) => [
    uniqueIndex('idem_outbox_id_idx').on(table.id),
    // The relays' claim scan: only rows still to publish, in publishing order.
    index('idem_outbox_pending_idx')
      .on(table.seq)
      .where(sql`${table.sentAt} is null and ${table.deadAt} is null`),
    // `ordered`: "is an earlier event of this aggregate unsent?" (dead rows included).
    index('idem_outbox_aggregate_unsent_idx')
      .on(table.aggregateKey, table.seq)
      .where(sql`${table.sentAt} is null and ${table.aggregateKey} is not null`),
    index('idem_outbox_sent_at_idx').on(table.sentAt).where(sql`${table.sentAt} is not null`),
    index('idem_outbox_dead_idx').on(table.seq).where(sql`${table.deadAt} is not null`),
  ],
);

export type OutboxEventRow = typeof outboxEvents.$inferSelect;

/**
 * The inbox of idempotent consumers: one row per (consumer, event) processed, written in
 * the same transaction as the consumer's own writes.
 */
export const inboxEvents = pgTable(
  'idem_inbox',
  {
    consumer: text('consumer').notNull(),
    eventId: text('event_id').notNull(),
    processedAt: instant('processed_at').notNull().defaultNow(),
  },
  (table) => [
    primaryKey({ name: 'idem_inbox_pkey', columns: [table.consumer, table.eventId] }),
    // Cleanup's range scan per consumer.
    index('idem_inbox_processed_at_idx').on(table.consumer, table.processedAt),
  ],
);

export type InboxEventRow = typeof inboxEvents.$inferSelect;
