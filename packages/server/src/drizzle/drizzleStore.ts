import {
  type ClaimRequest,
  type ClaimResult,
  type Clock,
  decideClaim,
  type IdempotencyRecord,
  type IdempotencyStore,
  isExpired,
  type JsonValue,
  LeaseLostError,
  type LeaseToken,
  type StoredOutcome,
  type SweepOptions,
} from '@idem/core';
import { and, eq, getTableColumns, type SQL, sql } from 'drizzle-orm';
import type { PgUpdateSetSource } from 'drizzle-orm/pg-core';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { rowsOf } from './rows.js';
import { type IdempotencyKeyRow, idempotencyKeys as keys } from './schema.js';

export interface DrizzleStoreOptions {
  /**
   * Where "now" comes from for leases and expiry.
   *
   * By default the store reads the DATABASE clock (`statement_timestamp()`, to the
   * millisecond), so every app server judges leases by one clock and skew between app
   * servers cannot make one of them take over a live lease early. With a `clock` the store
   * uses that clock's `now()` instead, as the conformance tests do with a `manualClock`.
   * @default the database clock
   */
  clock?: Clock;
}

/** The database's "now", truncated to the millisecond that records speak in. */
const DATABASE_NOW = sql`date_trunc('milliseconds', statement_timestamp())`;

/**
 * A claim only loops when the record changed under it: a concurrent claim inserted the key
 * after its snapshot, or took over or reset the row between its two statements.
 */
const MAX_CLAIM_ROUNDS = 100;

/**
 * An `IdempotencyStore` on the `idem_keys` table, for any Drizzle Postgres database or
 * transaction (postgres-js, PGlite, …). Run `migrate(db)` first.
 *
 * Pass a transaction to make claims and completions part of it (transaction mode); pass
 * the database for autocommit statements (lease mode).
 *
 * Statements per call:
 * - `claim` of a new key: one, `WITH inserted AS (INSERT … ON CONFLICT DO NOTHING
 *   RETURNING …) SELECT … FROM inserted UNION ALL SELECT …` the existing row, with the
 *   statement's "now";
 * - `claim` of a completed, live in-progress or mismatched key (replay, in progress,
 *   mismatch): that same statement, and it is read-only: `DO NOTHING` locks nothing, so
 *   the transaction gets no id, writes no WAL and its commit waits for no flush. core's
 *   `decideClaim` answers from the row it returns;
 * - `claim` of an expired key or of a lapsed lease: that statement, plus a conditional
 *   `UPDATE … WHERE version = <read> AND created_at = <read> AND <still expired or
 *   lapsed> RETURNING`. A concurrent claim that changed the row first makes it update
 *   nothing, and the claim starts over (bounded); so does the first statement finding
 *   nothing (a concurrent insert it waited for, invisible to its snapshot);
 * - `complete`, `release`, `heartbeat`, `saveStep`: one `UPDATE` fenced by version,
 *   creation time and status; `get`: one read; `sweep`: one `DELETE`.
 *
 * @example
 * const store = drizzleStore(drizzle(postgres(process.env.DATABASE_URL!)));
 */
export function drizzleStore(
  db: PgDatabaseLike,
  options: DrizzleStoreOptions = {},
): IdempotencyStore {
  const { clock } = options;

  /** "now" for one statement, and, with an injected clock, the number it stands for. */
  const instant = (): { nowMs: number | undefined; now: SQL } => {
    if (!clock) return { nowMs: undefined, now: DATABASE_NOW };
    const nowMs = clock.now();
    return { nowMs, now: sql`${new Date(nowMs).toISOString()}::timestamptz` };
  };
  const later = (now: SQL, ms: number) => sql`(${now} + ${ms}::float8 * interval '1 millisecond')`;
  const epochMs = (now: SQL) =>
    sql<number>`(extract(epoch from ${now}) * 1000)::bigint`.mapWith(Number);

  // `core`'s isExpired and isLeaseExpired, in SQL.
  const leaseExpired = (now: SQL) =>
    sql`(${keys.lockedUntil} is null or ${keys.lockedUntil} <= ${now})`;
  const expired = (now: SQL) =>
    sql`(${keys.expiresAt} <= ${now} and (${keys.status} = 'completed' or ${leaseExpired(now)}))`;

  const byId = (scope: string, key: string) => and(eq(keys.scope, scope), eq(keys.key, key));

  /** The row and the "now" it was read at, in one statement. */
  const read = async (scope: string, key: string) => {
    const { nowMs, now } = instant();
    const [row] = await db
      .select({ ...getTableColumns(keys), nowMs: epochMs(now) })
      .from(keys)
      .where(byId(scope, key));
    if (!row) return undefined;
    const { nowMs: databaseNowMs, ...columns } = row;
    return { record: toRecord(columns), nowMs: nowMs ?? databaseNowMs };
  };

  /**
   * Statement 1 of a claim: insert the key if it is new, else read the existing row, with
   * the statement's "now". Read-only when the key exists: `ON CONFLICT DO NOTHING` locks
   * nothing, so a replay, a mismatch or an in-progress answer takes no transaction id and
   * writes no WAL. The columns are listed in both arms: UNION ALL matches them by position.
   */
  const insertOrRead = async (request: ClaimRequest) => {
    const { nowMs, now } = instant();
    const insert = db
      .insert(keys)
      .values({
        scope: request.scope,
        key: request.key,
        fingerprint: request.fingerprint,
        status: 'in_progress',
        version: 1,
        lockedUntil: later(now, request.leaseMs),
        attempts: 1,
        outcome: null,
        steps: {},
        createdAt: now,
        completedAt: null,
        expiresAt: later(now, request.ttlMs),
      })
      .onConflictDoNothing({ target: [keys.scope, keys.key] });
    const result = await executePrepared(
      db,
      'idem_claim',
      sql`
      with inserted as (${insert.getSQL()} returning ${COLUMN_LIST})
      select ${COLUMN_LIST}, true as inserted, ${epochMs(now)} as now_ms from inserted
      union all
      select ${COLUMN_LIST}, false, ${epochMs(now)} from ${keys}
      where ${byId(request.scope, request.key)} and not exists (select 1 from inserted)`,
    );
    const [row] = rowsOf(result);
    if (!row) return undefined;
    return {
      inserted: row.inserted === true,
      record: toRecord(fromDriver(row)),
      nowMs: nowMs ?? Number(row.now_ms),
    };
  };

  /**
   * Statement 2 of a claim, only when `decideClaim` says an existing row is to be claimed:
   * reset it (expired) or take over its lapsed lease, if it is still the row that was read
   * (version and creation time) and still expired or lapsed by this statement's "now". A
   * concurrent claimant that got there first leaves nothing to update.
   */
  const takeOver = async (request: ClaimRequest, seen: IdempotencyRecord) => {
    const { now } = instant();
    const wasExpired = expired(now);
    const expiresAt = later(now, request.ttlMs);
    // Every expression reads the row as it was before this update. A reset starts afresh
    // (version + 1 so fencing tokens never repeat); a takeover keeps steps and creation time.
    const [claimed] = await db
      .update(keys)
      .set({
        fingerprint: request.fingerprint,
        status: 'in_progress',
        version: sql`${keys.version} + 1`,
        lockedUntil: later(now, request.leaseMs),
        attempts: sql`case when ${wasExpired} then 1 else ${keys.attempts} + 1 end`,
        outcome: null,
        steps: sql`case when ${wasExpired} then '{}'::jsonb else ${keys.steps} end`,
        createdAt: sql`case when ${wasExpired} then ${now} else ${keys.createdAt} end`,
        completedAt: null,
        expiresAt: sql`case when ${wasExpired} then ${expiresAt} else greatest(${keys.expiresAt}, ${expiresAt}) end`,
      })
      .where(
        and(
          byId(request.scope, request.key),
          eq(keys.version, seen.version),
          eq(keys.createdAt, new Date(seen.createdAt)),
          sql`(${wasExpired} or (${keys.status} = 'in_progress' and ${leaseExpired(now)} and ${keys.fingerprint} = ${request.fingerprint}))`,
        ),
      )
      .returning();
    return claimed && toRecord(claimed);
  };

  /** One fenced UPDATE: changes the row only for the live holder of `token`. */
  const fenced = async (token: LeaseToken, set: PgUpdateSetSource<typeof keys>) => {
    const updated = await db
      .update(keys)
      .set(set)
      .where(
        and(
          byId(token.scope, token.key),
          eq(keys.version, token.version),
          eq(keys.createdAt, new Date(token.createdAt)),
          eq(keys.status, 'in_progress'),
        ),
      )
      .returning({ version: keys.version })
      // A named prepared query is what makes Drizzle ask postgres-js to prepare the
      // statement: postgres-js then reuses it per connection (its text is the same on every
      // call) and runs it in one round trip instead of two. Other drivers ignore the name.
      .prepare('idem_fenced_update')
      .execute();
    if (updated.length === 0) throw new LeaseLostError(token.scope, token.key, token.version);
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
        const found = await insertOrRead(request);
        // Nothing: a concurrent claim inserted the key after this statement's snapshot was
        // taken (ON CONFLICT waited for it to commit), or the key was swept in between.
        if (!found) continue;
        if (found.inserted) return { status: 'claimed', takeover: false, record: found.record };
        const decision = decideClaim(found.record, request, found.nowMs);
        if (decision.status !== 'claimed') return decision; // replay, mismatch, in progress
        const claimed = await takeOver(request, found.record);
        if (claimed) return { status: 'claimed', takeover: claimed.attempts > 1, record: claimed };
        // Another claim (or the holder's heartbeat or completion) changed the row first.
      }
      throw new Error(
        `claim of idempotency key "${request.key}" did not settle after ${MAX_CLAIM_ROUNDS} rounds: ` +
          'the record kept changing between statements (is the database clock stepping back?)',
      );
    },

    async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
      const { now } = instant();
      await fenced(token, {
        status: 'completed',
        outcome,
        completedAt: now,
        lockedUntil: null,
        expiresAt: later(now, ttlMs),
      });
    },

    async release(token: LeaseToken): Promise<void> {
      await fenced(token, { lockedUntil: instant().now });
    },

    async heartbeat(token: LeaseToken, leaseMs: number): Promise<void> {
      await fenced(token, { lockedUntil: later(instant().now, leaseMs) });
    },

    async saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void> {
      // Name and value travel as parameters: a step name is data, never SQL text.
      await fenced(token, {
        steps: sql`${keys.steps} || jsonb_build_object(${name}::text, ${JSON.stringify(value)}::jsonb)`,
      });
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | null> {
      const current = await read(scope, key);
      return current && !isExpired(current.record, current.nowMs) ? current.record : null;
    },

    async sweep({ limit }: SweepOptions): Promise<number> {
      if (!(limit >= 1)) return 0;
      const { now } = instant();
      // SKIP LOCKED: concurrent sweepers split the work, and a row that a claim is
      // resetting right now is left to that claim.
      const doomed = db
        .select({ scope: keys.scope, key: keys.key })
        .from(keys)
        .where(expired(now))
        .limit(Math.floor(limit))
        .for('update', { skipLocked: true });
      const deleted = await db
        .delete(keys)
        .where(sql`(${keys.scope}, ${keys.key}) in ${doomed}`)
        .returning({ key: keys.key });
      return deleted.length;
    },
  };
}

const COLUMNS = getTableColumns(keys);
const COLUMN_LIST = sql.join(
  Object.values(COLUMNS).map((column) => sql.identifier(column.name)),
  sql`, `,
);

/** Rows of `execute`: postgres-js returns an array, PGlite `{ rows }`. */
/** A raw row of `execute` (column names, driver values) as Drizzle's select would map it. */
function fromDriver(raw: Record<string, unknown>): IdempotencyKeyRow {
  const row: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(COLUMNS)) {
    const value = raw[column.name];
    row[field] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row as IdempotencyKeyRow;
}

function toRecord(row: IdempotencyKeyRow): IdempotencyRecord {
  return {
    scope: row.scope,
    key: row.key,
    fingerprint: row.fingerprint,
    status: row.status,
    version: row.version,
    lockedUntil: row.lockedUntil ? row.lockedUntil.getTime() : null,
    attempts: row.attempts,
    outcome: row.outcome ?? null,
    steps: row.steps,
    createdAt: row.createdAt.getTime(),
    completedAt: row.completedAt ? row.completedAt.getTime() : null,
    expiresAt: row.expiresAt.getTime(),
  };
}

/**
 * `db.execute(query)` as a named prepared query. Drizzle asks postgres-js to prepare a
 * statement only for a named query; postgres-js then reuses it per connection (the text is
 * the same on every call) and runs it in one round trip instead of two. Other drivers
 * ignore the name. Drizzle has no public API for a raw prepared query, so this goes through
 * `db._.session` and the dialect, exactly as `db.execute` does.
 */
function executePrepared(db: PgDatabaseLike, name: string, query: SQL): Promise<unknown> {
  const internals = db as unknown as {
    dialect: { sqlToQuery(sql: SQL): { sql: string; params: unknown[] } };
    _: { session: { prepareQuery(...args: unknown[]): { execute(): Promise<unknown> } } };
  };
  const built = internals.dialect.sqlToQuery(query);
  return internals._.session.prepareQuery(built, undefined, name, false).execute();
}
