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

/** A claim only loops when the record changed between its two statements. */
const MAX_CLAIM_ROUNDS = 100;

/**
 * An `IdempotencyStore` on the `idem_keys` table, for any Drizzle Postgres database or
 * transaction (postgres-js, PGlite, …). Run `migrate(db)` first.
 *
 * Pass a transaction to make claims and completions part of it (transaction mode); pass
 * the database for autocommit statements (lease mode).
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
      .returning({ version: keys.version });
    if (updated.length === 0) throw new LeaseLostError(token.scope, token.key, token.version);
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
        const { now } = instant();
        // In the conflict branch `excluded.created_at` is this statement's "now": one value,
        // computed (or sent) once.
        const then = sql.raw('excluded.created_at');
        const wasExpired = expired(then);
        // The whole claim table in one statement: insert a new key, or reset an expired
        // record (version + 1 so fencing tokens never repeat), or take over a lapsed lease
        // of the same payload. Any other existing row is left alone and returns nothing.
        const [claimed] = await db
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
          .onConflictDoUpdate({
            target: [keys.scope, keys.key],
            // Every expression reads the existing row as it was before this update. Outcome
            // and completion time are null in both branches: a taken-over row is in progress,
            // and only `complete` (which also ends the progress) ever sets them.
            set: {
              fingerprint: sql`excluded.fingerprint`,
              status: sql`excluded.status`,
              version: sql`${keys.version} + 1`,
              lockedUntil: sql`excluded.locked_until`,
              attempts: sql`case when ${wasExpired} then 1 else ${keys.attempts} + 1 end`,
              outcome: null,
              steps: sql`case when ${wasExpired} then excluded.steps else ${keys.steps} end`,
              createdAt: sql`case when ${wasExpired} then excluded.created_at else ${keys.createdAt} end`,
              completedAt: null,
              expiresAt: sql`case when ${wasExpired} then excluded.expires_at else greatest(${keys.expiresAt}, excluded.expires_at) end`,
            },
            setWhere: sql`${wasExpired} or (${keys.status} = 'in_progress' and ${leaseExpired(then)} and ${keys.fingerprint} = excluded.fingerprint)`,
          })
          .returning();
        if (claimed) {
          const record = toRecord(claimed);
          return { status: 'claimed', takeover: record.attempts > 1, record };
        }

        // The key is taken: read it to say why (replay, mismatch or in progress).
        const current = await read(request.scope, request.key);
        if (!current) continue; // swept in between: claim afresh
        const decision = decideClaim(current.record, request, current.nowMs);
        if (decision.status === 'claimed') continue; // lapsed in between: claim it for real
        return decision;
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
