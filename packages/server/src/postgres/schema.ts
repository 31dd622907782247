import type { JsonValue } from '@idem/core';
import type { RecordStatus, StoredOutcome } from '@idem/core/store';
import { sql } from 'drizzle-orm';
import { check, index, integer, json, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { instant } from './sqlTime.js';

/**
 * One row per idempotency key: the record of `@idem/core`'s claim table. Add it to your
 * own Drizzle schema if you want drizzle-kit to know about it; `migrate()` creates it.
 */
export const idempotencyKeys = pgTable(
  'idem_keys',
  {
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    status: text('status').$type<RecordStatus>().notNull(),
    version: integer('version').notNull(),
    lockedUntil: instant('locked_until'),
    attempts: integer('attempts').notNull(),
    // json, not jsonb: jsonb reorders object keys, and a replay must return the body the
    // first attempt returned, key order included.
    outcome: json('outcome').$type<StoredOutcome>(),
    steps: jsonb('steps').$type<Record<string, JsonValue>>().notNull().default(sql`'{}'::jsonb`),
    createdAt: instant('created_at').notNull(),
    completedAt: instant('completed_at'),
    expiresAt: instant('expires_at').notNull(),
  },
  (table) => [
    primaryKey({ name: 'idem_keys_pkey', columns: [table.scope, table.key] }),
    check('idem_keys_status_check', sql`${table.status} in ('in_progress', 'completed')`),
    // The sweeper's range scan: expired rows are found without reading live ones.
    index('idem_keys_expires_at_idx').on(table.expiresAt),
  ],
);

export type IdempotencyKeyRow = typeof idempotencyKeys.$inferSelect;

// drizzle-kit reads this one file, so the outbox's tables are re-exported here.
export {
  type InboxEventRow,
  inboxEvents,
  type OutboxEventRow,
  outboxEvents,
} from '../outbox/schema.js';
