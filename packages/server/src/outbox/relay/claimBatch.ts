import type { Clock } from '@idem/core';
import { and, asc, isNull, lte, or, type SQL, sql } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { nowStatementName, sqlLater, sqlNow } from '../../postgres/sqlTime.js';
import { messageColumns, outboxMessageOf } from '../internal/outboxMessageOf.js';
import type { OutboxMessage } from '../OutboxMessage.js';
import { outboxEvents as outbox } from '../schema.js';

/** An event a relay holds the lease of. */
export interface ClaimedEvent {
  /** The row's key: settling a published batch finds its rows by it. */
  seq: number;
  message: OutboxMessage;
  /** Failed attempts so far. */
  attempts: number;
}

export interface ClaimOptions {
  batchSize: number;
  leaseMs: number;
  ordered: boolean;
  /** Written to `locked_by`; settling the batch only touches rows that still carry it. */
  token: string;
  clock: Clock | undefined;
}

/**
 * Leases up to `batchSize` events that are due, in one statement. `SKIP LOCKED` lets
 * relays claim side by side without waiting on each other; the lease lets another relay
 * take the rows back if this one dies before settling them.
 */
export async function claimBatch(
  db: PgDatabaseLike,
  options: ClaimOptions,
): Promise<ClaimedEvent[]> {
  const now = sqlNow(options.clock);
  const conditions: (SQL | undefined)[] = [
    isNull(outbox.sentAt),
    isNull(outbox.deadAt),
    lte(outbox.availableAt, now),
    or(isNull(outbox.lockedUntil), lte(outbox.lockedUntil, now)),
  ];
  if (options.ordered) {
    // Only the first unsent event of each aggregate is due. Dead events count as unsent,
    // so a dead-lettered event holds its aggregate back until it is re-driven. There is no
    // "highest seq seen" cursor: every statement reads the table afresh, so an event whose
    // transaction commits late is found whenever it becomes visible.
    const earlier = sql`select 1 from ${outbox} as earlier
      where earlier.aggregate_key = ${outbox.aggregateKey}
        and earlier.sent_at is null
        and earlier.seq < ${outbox.seq}`;
    conditions.push(sql`(${outbox.aggregateKey} is null or not exists (${earlier}))`);
  }
  const due = db
    .select({ seq: outbox.seq })
    .from(outbox)
    .where(and(...conditions))
    .orderBy(asc(outbox.seq))
    .limit(options.batchSize)
    .for('update', { skipLocked: true });
  const rows = await db
    .update(outbox)
    .set({ lockedUntil: sqlLater(now, options.leaseMs), lockedBy: options.token })
    // `= any(array(…))`, not `in (…)`: the sub-select runs exactly once, so the rows it
    // locked are the rows updated (a semi-join may re-run a LIMIT … SKIP LOCKED sub-select).
    .where(sql`${outbox.seq} = any(array(${due}))`)
    .returning({ seq: outbox.seq, ...messageColumns, attempts: outbox.attempts })
    // Prepared (the text is the same every round): on postgres-js an unprepared statement
    // with parameters costs a describe round trip and a parse and plan every time.
    .prepare(
      nowStatementName(
        options.ordered ? 'idem_outbox_claim_ordered' : 'idem_outbox_claim',
        options.clock,
      ),
    )
    .execute();
  rows.sort((a, b) => a.seq - b.seq);
  return rows.map((row) => ({
    seq: row.seq,
    attempts: row.attempts,
    message: outboxMessageOf(row),
  }));
}
