import { type SQL, sql } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/**
 * One batch of a cleanup, in one statement: `DELETE … WHERE <key> IN (SELECT <key> …
 * WHERE <doomed> LIMIT <limit> FOR UPDATE SKIP LOCKED) RETURNING`. `SKIP LOCKED` lets
 * concurrent cleaners (several app servers, relays) split the rows instead of queueing,
 * and leaves a row that someone is changing right now to them. A one-column key goes
 * through `= any(array(…))`, which Postgres runs once as an init plan (a semi-join could
 * run a `LIMIT … SKIP LOCKED` sub-select again).
 *
 * Returns the builder, so the caller can run it or `.prepare()` it; it resolves with one
 * row per deleted row.
 */
export function deleteSkipLocked(
  db: PgDatabaseLike,
  table: PgTable,
  options: { key: readonly [PgColumn, ...PgColumn[]]; doomed: SQL | undefined; limit: unknown },
) {
  const [first, ...rest] = options.key;
  const picked = db
    .select(Object.fromEntries(options.key.map((column) => [column.name, column])))
    .from(table)
    .where(options.doomed)
    .limit(options.limit as number)
    .for('update', { skipLocked: true });
  const chosen =
    rest.length === 0
      ? sql`${first} = any(array(${picked}))`
      : sql`(${sql.join([...options.key], sql`, `)}) in ${picked}`;
  return db.delete(table).where(chosen).returning({ deleted: first });
}
