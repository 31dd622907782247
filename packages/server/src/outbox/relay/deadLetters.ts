import type { Clock } from '@idem/core';
import { and, asc, gt, inArray, isNotNull } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { sqlNow } from '../../postgres/sqlTime.js';
import { outboxMessageOf } from '../internal/outboxMessageOf.js';
import type { OutboxMessage } from '../OutboxMessage.js';
import { outboxEvents as outbox } from '../schema.js';

/** A dead-lettered event: it failed `maxAttempts` times and waits for `redrive`. */
export interface DeadLetter extends OutboxMessage {
  /** Its place in the outbox; pass the last one as `afterSeq` to read the next page. */
  seq: number;
  attempts: number;
  lastError: string | null;
  deadAt: Date;
}

export interface ListDeadLettersOptions {
  /**
   * The most rows returned.
   * @default 100
   */
  limit?: number;
  /**
   * Only events after this `seq` (paging).
   * @default 0
   */
  afterSeq?: number;
}

/** Dead-lettered events, oldest first. */
export async function listDeadLetters(
  db: PgDatabaseLike,
  { limit = 100, afterSeq = 0 }: ListDeadLettersOptions = {},
): Promise<DeadLetter[]> {
  const rows = await db
    .select()
    .from(outbox)
    .where(and(isNotNull(outbox.deadAt), gt(outbox.seq, afterSeq)))
    .orderBy(asc(outbox.seq))
    .limit(limit);
  // Every row has its deadAt (the filter above); the check only tells TypeScript so.
  return rows.flatMap(({ seq, attempts, lastError, deadAt, ...row }) =>
    deadAt ? [{ seq, ...outboxMessageOf(row), attempts, lastError, deadAt }] : [],
  );
}

/**
 * Puts dead-lettered events back in line with a fresh count of attempts, and returns the
 * ids it re-drove (ids that are not dead are left alone). `last_error` is kept as history.
 */
export async function redriveDeadLetters(
  db: PgDatabaseLike,
  ids: readonly string[],
  clock: Clock | undefined,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .update(outbox)
    .set({ deadAt: null, attempts: 0, availableAt: sqlNow(clock) })
    .where(and(inArray(outbox.id, [...ids]), isNotNull(outbox.deadAt)))
    .returning({ id: outbox.id });
  return rows.map((row) => row.id);
}
