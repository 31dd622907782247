import { and, getTableColumns, notExists, type SQL, sql } from 'drizzle-orm';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { type IdempotencyKeyRow, idempotencyKeys as keys } from './schema.js';

/** The columns of `idem_keys`, in table order: what a statement returns as a record. */
export const COLUMNS = getTableColumns(keys);

type ColumnName = keyof typeof COLUMNS;
const COLUMN_NAMES = Object.keys(COLUMNS) as ColumnName[];

/** The fields named as `idem_keys`' columns of a CTE or subquery over its rows, in table order. */
export function columnsOf<T extends Record<ColumnName, unknown>>(source: T): Pick<T, ColumnName> {
  const fields = {} as Pick<T, ColumnName>;
  for (const name of COLUMN_NAMES) fields[name] = source[name];
  return fields;
}

/** What the claim is built from: the store's pieces (see `prepareStatements`). */
interface ClaimParts {
  db: PgDatabaseLike;
  now: SQL;
  byId: SQL | undefined;
  nowMs: SQL<number>;
  restored: SQL;
}

/** The values of a claimed new key, as placeholders and SQL. */
interface NewKey {
  scope: unknown;
  key: unknown;
  fingerprint: unknown;
  lockedUntil: SQL;
  expiresAt: SQL;
}

/**
 * The claim on a database (lease mode): the new key, inserted only where the statement's
 * snapshot has no row for it, or the existing row, with whether it was inserted and the
 * statement's "now". An existing key (a replay, a mismatch, a live holder) is read and no
 * insert is tried (no conflict check, no speculative insertion): the statement costs the
 * server about what a read does. A new key's row is not sent back (its columns come as
 * nulls): the caller knows it from the request and the statement's "now". A key that a
 * concurrent claim inserted after the snapshot makes `ON CONFLICT` wait for it and do
 * nothing, and the statement return no row, as the statement that tries every key does.
 *
 * Transaction mode keeps that other statement: its key lock is taken in the new row's
 * values, which only a row the insert tries computes.
 */
export function readFirstClaim(parts: ClaimParts, newKey: NewKey) {
  const { db, now, byId, nowMs, restored } = parts;
  // In table order, each typed: a SELECT's parameters do not take the columns' types.
  const row: Record<ColumnName, SQL> = {
    scope: sql`${newKey.scope}::text`,
    key: sql`${newKey.key}::text`,
    fingerprint: sql`${newKey.fingerprint}::text`,
    status: sql`'in_progress'`,
    version: sql`1`,
    lockedUntil: newKey.lockedUntil,
    attempts: sql`1`,
    outcome: sql`null::json`,
    steps: sql`'{}'::jsonb`,
    createdAt: now,
    completedAt: sql`null::timestamptz`,
    expiresAt: newKey.expiresAt,
  };
  const absent = notExists(db.select({ one: sql`1` }).from(keys).where(byId));
  const values = sql.join(
    COLUMN_NAMES.map((name) => row[name]),
    sql`, `,
  );
  const inserted = db.$with('inserted').as(
    db
      .insert(keys)
      .select(sql`select ${values} where ${absent}`)
      .onConflictDoNothing({ target: [keys.scope, keys.key] })
      .returning({ one: sql`1`.as('one') }),
  );
  // Typed as the columns for the union; a row with `inserted` is never read as a record.
  const nulls = Object.fromEntries(COLUMN_NAMES.map((name) => [name, sql`null`.as(name)])) as {
    [K in ColumnName]: SQL.Aliased<IdempotencyKeyRow[K]>;
  };
  // UNION ALL matches columns by position; the first branch gives them types and decoders.
  const found = db
    .select({ ...COLUMNS, inserted: sql<boolean>`false`.as('inserted'), nowMs: nowMs.as('now_ms') })
    .from(keys)
    .where(and(byId, notExists(db.select({ one: sql`1` }).from(inserted))))
    .unionAll(
      db
        .select({
          ...nulls,
          inserted: sql<boolean>`true`.as('inserted'),
          nowMs: nowMs.as('now_ms'),
        })
        .from(inserted),
    )
    .as('found');
  return db
    .with(inserted)
    .select({ ...columnsOf(found), inserted: found.inserted, nowMs: found.nowMs, restored })
    .from(found);
}
