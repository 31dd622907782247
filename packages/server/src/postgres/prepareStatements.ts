import type { Clock } from '@idem/core';
import { and, eq, notExists, sql } from 'drizzle-orm';
import type { PgUpdateSetSource, SelectedFieldsFlat } from 'drizzle-orm/pg-core';
import { deleteSkipLocked } from './deleteSkipLocked.js';
import { directPrepared } from './directQuery.js';
import { keyLockArgs } from './keyLock.js';
import { completeManyStatement, insertManyStatement, readManyStatement } from './manyStatements.js';
import { once } from './once.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { COLUMNS, columnsOf, readFirstClaim } from './readFirstClaim.js';
import { idempotencyKeys as keys } from './schema.js';
import { sqlEpochMs, sqlInstant, sqlLater, sqlNow } from './sqlTime.js';

/** Values bound per call into the statements prepared once per store. */
const param = {
  scope: sql.placeholder('scope'),
  key: sql.placeholder('key'),
  fingerprint: sql.placeholder('fingerprint'),
  leaseMs: sql.placeholder('leaseMs'),
  ttlMs: sql.placeholder('ttlMs'),
  version: sql.placeholder('version'),
  createdAt: sql.placeholder('createdAt'),
  outcome: sql.placeholder('outcome'),
  stepName: sql.placeholder('stepName'),
  stepValue: sql.placeholder('stepValue'),
  now: sql.placeholder('now'),
  limit: sql.placeholder('limit'),
  lockWait: sql.placeholder('lockWait'),
};

/**
 * Bounds this transaction's `lock_timeout` for the claim, and evaluates to 1 (the
 * `attempts` of a new row). It sits in the inserted row's values because those are computed
 * before the insert looks for a conflicting row and waits for it. The caller's value is
 * kept in `idem.lock_timeout` first (the inner select runs first), once per transaction, so
 * a claim that has to run twice still restores the caller's value.
 */
const BOUND_LOCK_WAIT = sql`select 1 from (select set_config('lock_timeout', ${param.lockWait}::text, true) from (select set_config('idem.lock_timeout', coalesce(nullif(current_setting('idem.lock_timeout', true), ''), current_setting('lock_timeout')), true)) as saved) as bounded`;

/** Puts back the `lock_timeout` that {@link BOUND_LOCK_WAIT} replaced. */
const RESTORE_LOCK_WAIT = sql<string>`set_config('lock_timeout', current_setting('idem.lock_timeout'), true)`;

/** {@link RESTORE_LOCK_WAIT} when this transaction set the bound; null when it did not. */
const RESTORE_LOCK_WAIT_IF_SET = sql<
  string | null
>`case when current_setting('idem.lock_timeout', true) <> '' then ${RESTORE_LOCK_WAIT} end`;

/**
 * The store's statements, each built once, on first use (a store made for one transaction
 * builds only what it runs), with placeholders, and prepared on `db`. Their names tell apart the two shapes of "now" (the database's, or a bound clock value), so a driver
 * that names server-side statements (node-postgres) never sees one name with two texts.
 */
export function prepareStatements(
  db: PgDatabaseLike,
  clock: Clock | undefined,
  boundLockWait: boolean,
  keyLock: boolean,
) {
  const parts = statementParts(db, clock, boundLockWait, keyLock);
  const { name, byId, nowMs } = parts;
  const completion = {
    status: 'completed',
    outcome: sql`${param.outcome}::json`,
    completedAt: parts.now,
    lockedUntil: null,
    expiresAt: sqlLater(parts.now, param.ttlMs),
  } as const;
  /** `query` prepared under the store's name for `statement`, run the cheapest way `db` allows. */
  const prepared = <T extends { execute(values?: Record<string, unknown>): Promise<unknown> }>(
    query: { prepare(name: string): T },
    statement: string,
  ) => directPrepared(query.prepare(name(statement)), db);
  const fencedUpdate = (statement: string, set: FencedSet) =>
    once(() => prepared(fencedUpdateOf(parts, set), statement));
  return {
    // A new key's row is not sent back: the caller knows it from the request and "now".
    insertNew: once(() =>
      prepared(insertNewKey(parts, { nowMs: nowMs.as('now_ms') }), 'insert_new'),
    ),
    // Transaction mode's claim takes the key's lock in the new row's values, which only a
    // row the insert tries computes: it keeps the statement that tries every key.
    claim: once(() =>
      prepared(
        boundLockWait || keyLock ? claimStatement(parts) : readFirstClaim(parts, parts.newKey),
        'claim',
      ),
    ),
    takeOver: once(() => prepared(takeOverStatement(parts), 'take_over')),
    complete: fencedUpdate('complete', completion),
    release: fencedUpdate('release', { lockedUntil: parts.now }),
    heartbeat: fencedUpdate('heartbeat', { lockedUntil: sqlLater(parts.now, param.leaseMs) }),
    saveStep: fencedUpdate('save_step', {
      steps: sql`${keys.steps} || jsonb_build_object(${param.stepName}::text, ${param.stepValue}::jsonb)`,
    }),
    read: once(() =>
      prepared(
        db
          .select({ ...COLUMNS, nowMs })
          .from(keys)
          .where(byId),
        'read',
      ),
    ),
    // Several calls' reads, new keys and completions, one statement each (`manyStatements`).
    readMany: once(() => prepared(readManyStatement(parts), 'read_many')),
    insertMany: once(() => prepared(insertManyStatement(parts), 'insert_many')),
    completeMany: once(() => prepared(completeManyStatement(parts), 'complete_many')),
    // SKIP LOCKED: concurrent sweepers split the work, and a row that a claim is resetting
    // right now is left to that claim.
    sweep: once(() =>
      prepared(
        deleteSkipLocked(db, keys, {
          key: [keys.scope, keys.key],
          doomed: parts.expired,
          limit: param.limit,
        }),
        'sweep',
      ),
    ),
    /** Statements as built, unprepared, for `renderedStatement`. */
    unprepared: {
      insertNew: <TFields extends SelectedFieldsFlat>(fields: TFields) =>
        insertNewKey(parts, fields),
      complete: () => fencedUpdateOf(parts, completion),
    },
  };
}

/** The pieces every statement of one store is made of. */
type StatementParts = ReturnType<typeof statementParts>;
type FencedSet = PgUpdateSetSource<typeof keys>;

function statementParts(
  db: PgDatabaseLike,
  clock: Clock | undefined,
  boundLockWait: boolean,
  keyLock: boolean,
) {
  // The key lock is transaction mode's, which always bounds its wait.
  if (keyLock && !boundLockWait)
    throw new Error('idem: a claim with the key lock needs lockWaitMs');
  const now = sqlNow(clock, param.now);
  const suffix = `${clock ? '_at' : ''}${boundLockWait ? '_bounded' : ''}${keyLock ? '_locked' : ''}`;
  // `core`'s isExpired and isLeaseExpired, in SQL.
  const leaseExpired = sql`(${keys.lockedUntil} is null or ${keys.lockedUntil} <= ${now})`;
  // The values of a claimed new key. With a bound, `attempts` carries it (see
  // BOUND_LOCK_WAIT), and the key lock after it, so that the lock's wait is bounded too.
  // A free key's lock is taken at once, and then nothing is bounded: no setting changes,
  // and none is put back. Only a held lock waits, bounded (the subquery runs only then).
  const lock = keyLockArgs(param.scope, param.key);
  const waitForLock = sql`(select 1 from (select pg_advisory_xact_lock(${lock}) from (${BOUND_LOCK_WAIT}) as bounded) as locked)`;
  const attempts = keyLock
    ? sql`(case when pg_try_advisory_xact_lock(${lock}) then 1 else ${waitForLock} end)`
    : boundLockWait
      ? sql`(${BOUND_LOCK_WAIT})`
      : 1;
  return {
    db,
    now,
    name: (statement: string) => `idem_${statement}${suffix}`,
    byId: and(eq(keys.scope, param.scope), eq(keys.key, param.key)),
    nowMs: sqlEpochMs(now),
    leaseExpired,
    expired: sql`(${keys.expiresAt} <= ${now} and (${keys.status} = 'completed' or ${leaseExpired}))`,
    newKey: {
      scope: param.scope,
      key: param.key,
      fingerprint: param.fingerprint,
      status: 'in_progress',
      version: 1,
      lockedUntil: sqlLater(now, param.leaseMs),
      attempts,
      outcome: null,
      steps: sql`'{}'::jsonb`,
      createdAt: now,
      completedAt: null,
      expiresAt: sqlLater(now, param.ttlMs),
    } as const,
    // With a bound, RETURNING puts `lock_timeout` back: it runs after the insert (and its wait).
    // Behind a key lock taken at once there is nothing to put back, unless an earlier claim
    // of this transaction set the bound.
    restored: keyLock
      ? RESTORE_LOCK_WAIT_IF_SET
      : boundLockWait
        ? RESTORE_LOCK_WAIT
        : sql<null>`null`,
  };
}

/** The new key alone, with the given fields returned (and `lock_timeout` put back). */
function insertNewKey<TFields extends SelectedFieldsFlat>(parts: StatementParts, fields: TFields) {
  return parts.db
    .insert(keys)
    .values(parts.newKey)
    .onConflictDoNothing({ target: [keys.scope, keys.key] })
    .returning({ ...fields, restored: parts.restored });
}

/**
 * The claim: the new key, or the existing row with whether it was inserted and the
 * statement's "now". Read-only when the key exists: `ON CONFLICT DO NOTHING` locks nothing,
 * so a replay, a mismatch or an in-progress answer takes no transaction id and writes no WAL.
 */
function claimStatement(parts: StatementParts) {
  const { db, byId, nowMs, restored } = parts;
  const inserted = db.$with('inserted').as(
    db
      .insert(keys)
      .values(parts.newKey)
      .onConflictDoNothing({ target: [keys.scope, keys.key] })
      .returning(),
  );
  // The data-modifying CTE must sit at the top level: the union is a subquery of it.
  const found = db
    .select({
      // UNION ALL matches columns by position: the same fields, in the same order, as below.
      ...columnsOf(inserted),
      inserted: sql<boolean>`true`.as('inserted'),
      nowMs: nowMs.as('now_ms'),
    })
    .from(inserted)
    .unionAll(
      db
        .select({
          ...COLUMNS,
          inserted: sql<boolean>`false`.as('inserted'),
          nowMs: nowMs.as('now_ms'),
        })
        .from(keys)
        .where(and(byId, notExists(db.select({ one: sql`1` }).from(inserted)))),
    )
    .as('found');
  // With a bound, `lock_timeout` goes back to the caller's value once the row is decided:
  // evaluated per row of `found`, so after the insert (and its wait) ran.
  return db
    .with(inserted)
    .select({ ...columnsOf(found), inserted: found.inserted, nowMs: found.nowMs, restored })
    .from(found);
}

/**
 * Resets an expired row, or takes over its lapsed lease, if it is still the row that was
 * read (version and creation time) and still expired or lapsed by this statement's "now".
 * Every expression reads the row as it was before this update. A reset starts afresh
 * (version + 1 so fencing tokens never repeat); a takeover keeps steps and creation time.
 */
function takeOverStatement({ db, now, byId, expired, leaseExpired }: StatementParts) {
  const expiresAt = sqlLater(now, param.ttlMs);
  return db
    .update(keys)
    .set({
      fingerprint: sql`${param.fingerprint}`,
      status: 'in_progress',
      version: sql`${keys.version} + 1`,
      lockedUntil: sqlLater(now, param.leaseMs),
      attempts: sql`case when ${expired} then 1 else ${keys.attempts} + 1 end`,
      outcome: null,
      steps: sql`case when ${expired} then '{}'::jsonb else ${keys.steps} end`,
      createdAt: sql`case when ${expired} then ${now} else ${keys.createdAt} end`,
      completedAt: null,
      expiresAt: sql`case when ${expired} then ${expiresAt} else greatest(${keys.expiresAt}, ${expiresAt}) end`,
    })
    .where(
      and(
        byId,
        eq(keys.version, param.version),
        eq(keys.createdAt, sqlInstant(param.createdAt)),
        sql`(${expired} or (${keys.status} = 'in_progress' and ${leaseExpired} and ${keys.fingerprint} = ${param.fingerprint}))`,
      ),
    )
    .returning();
}

/** An update of the row a token holds, only while it holds it (version, creation, in progress). */
function fencedUpdateOf({ db, byId }: StatementParts, set: FencedSet) {
  return db
    .update(keys)
    .set(set)
    .where(
      and(
        byId,
        eq(keys.version, param.version),
        eq(keys.createdAt, sqlInstant(param.createdAt)),
        eq(keys.status, 'in_progress'),
      ),
    )
    .returning({ version: keys.version });
}
