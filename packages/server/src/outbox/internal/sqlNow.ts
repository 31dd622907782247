import type { Clock } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';

/**
 * "Now" for one statement: the database's clock by default, so every relay and consumer
 * judges leases and schedules by one clock whatever the skew between app servers; the
 * injected clock's time when there is one (tests drive it with a `manualClock`).
 */
export function sqlNow(clock: Clock | undefined): SQL {
  return clock
    ? sql`${new Date(clock.now()).toISOString()}::timestamptz`
    : sql`statement_timestamp()`;
}

/** `now` plus `ms` milliseconds, as a timestamptz expression. */
export function sqlLater(now: SQL, ms: number): SQL {
  return sql`(${now} + ${ms}::float8 * interval '1 millisecond')`;
}
