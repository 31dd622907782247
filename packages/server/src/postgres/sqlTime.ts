import type { Clock } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { timestamp } from 'drizzle-orm/pg-core';

/**
 * A timestamptz column of millisecond precision, for idem's tables: records speak epoch
 * milliseconds, so a stored time reads back as exactly the number that was meant, and lease
 * arithmetic never rounds.
 */
export const instant = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/**
 * "Now" for one statement, in SQL: the database's clock by default, so every app server
 * judges leases, expiry and schedules by one clock whatever the skew between them;
 * `nowParameter` (the injected clock's time, an ISO string bound per call) when there is a
 * clock, as tests drive it with a `manualClock`. Truncated to the millisecond that records
 * speak in: a timestamp column of millisecond precision rounds, and a rounded-up "now"
 * would put a lease end half a millisecond in the future.
 */
export function sqlNow(clock: Clock | undefined, nowParameter?: unknown): SQL {
  if (!clock) return sql`date_trunc('milliseconds', statement_timestamp())`;
  const value = nowParameter ?? new Date(clock.now()).toISOString();
  return sql`${value}::timestamptz`;
}

/**
 * The name to prepare a statement holding `sqlNow(clock)` under: the database's "now" and a
 * bound clock value make two texts of one statement, and node-postgres, which prepares a
 * named statement on the server once per connection, refuses a name that comes back with
 * another text ("Prepared statements must be unique").
 */
export function nowStatementName(name: string, clock: Clock | undefined): string {
  return clock ? `${name}_at` : name;
}

/** `now` plus `ms` milliseconds (a number, or a placeholder bound per call), as timestamptz. */
export function sqlLater(now: SQL, ms: unknown): SQL {
  return sql`(${now} + ${ms}::float8 * interval '1 millisecond')`;
}

/** A timestamptz as epoch milliseconds, a JS number. */
export function sqlEpochMs(instant: SQL): SQL<number> {
  return sql<number>`(extract(epoch from ${instant}) * 1000)::bigint`.mapWith(Number);
}

/**
 * Epoch milliseconds (a number, or a placeholder bound per call) as timestamptz, exactly:
 * a millisecond's float8 seconds, times 10^6 and rounded, is that millisecond's microsecond.
 * A bound number costs the call nothing to format (an ISO string did: a `Date` and
 * `toISOString` per statement).
 */
export function sqlInstant(ms: unknown): SQL {
  return sql`to_timestamp(${ms}::float8 / 1000)`;
}
