import type { Clock } from '@idem/core';
import { and, isNotNull, lt, sql } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../drizzle/PgDatabaseLike.js';
import { sqlLater, sqlNow } from '../internal/sqlNow.js';
import { outboxEvents as outbox } from '../schema.js';

/**
 * Deletes up to `limit` events that were sent more than `retainSentMs` ago; returns how
 * many. Unsent and dead events are never touched.
 */
export async function cleanupSent(
  db: PgDatabaseLike,
  options: { retainSentMs: number; limit: number; clock: Clock | undefined },
): Promise<number> {
  const cutoff = sqlLater(sqlNow(options.clock), -options.retainSentMs);
  // SKIP LOCKED: relays cleaning up at the same time split the rows instead of queueing.
  const doomed = db
    .select({ seq: outbox.seq })
    .from(outbox)
    .where(and(isNotNull(outbox.sentAt), lt(outbox.sentAt, cutoff)))
    .limit(options.limit)
    .for('update', { skipLocked: true });
  const deleted = await db
    .delete(outbox)
    .where(sql`${outbox.seq} = any(array(${doomed}))`)
    .returning({ seq: outbox.seq });
  return deleted.length;
}
