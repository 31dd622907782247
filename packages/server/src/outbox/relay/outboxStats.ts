import type { Clock } from '@idem/core';
import { isNull, sql } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../postgres/PgDatabaseLike.js';
import { sqlNow } from '../../postgres/sqlTime.js';
import { outboxEvents as outbox } from '../schema.js';

/** What the outbox table holds right now, whoever relays it. */
export interface OutboxBacklog {
  /** Events waiting to be published (not sent, not dead). */
  backlog: number;
  /** How long the oldest waiting event has waited, in ms; `null` when none waits. */
  oldestUnsentAgeMs: number | null;
  /** Dead-lettered events waiting for `redrive`. */
  dead: number;
}

export async function outboxBacklog(
  db: PgDatabaseLike,
  clock: Clock | undefined,
): Promise<OutboxBacklog> {
  const waiting = sql`${outbox.deadAt} is null`;
  const [row] = await db
    .select({
      backlog: sql<number>`count(*) filter (where ${waiting})`.mapWith(Number),
      dead: sql<number>`count(*) filter (where ${outbox.deadAt} is not null)`.mapWith(Number),
      oldestAgeMs: sql<
        number | null
      >`extract(epoch from (${sqlNow(clock)} - min(${outbox.createdAt}) filter (where ${waiting}))) * 1000`,
    })
    .from(outbox)
    .where(isNull(outbox.sentAt));
  const oldest = row?.oldestAgeMs;
  return {
    backlog: row?.backlog ?? 0,
    dead: row?.dead ?? 0,
    oldestUnsentAgeMs: oldest === null || oldest === undefined ? null : Math.max(0, Number(oldest)),
  };
}
