import type { Clock } from '@idem/core';
import { and, isNotNull, lt } from 'drizzle-orm';
import { deleteSkipLocked } from '../../postgres/deleteSkipLocked.js';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { sqlLater, sqlNow } from '../../postgres/sqlTime.js';
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
  // Relays cleaning up at the same time split the rows instead of queueing.
  const deleted = await deleteSkipLocked(db, outbox, {
    key: [outbox.seq],
    doomed: and(isNotNull(outbox.sentAt), lt(outbox.sentAt, cutoff)),
    limit: options.limit,
  });
  return deleted.length;
}
