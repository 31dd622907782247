import { type Clock, type JsonValue, LeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  decideClaim,
  type IdempotencyRecord,
  type IdempotencyStore,
  isExpired,
  type LeaseToken,
  type StoredOutcome,
  type SweepOptions,
} from '@idem/core/store';
import { and, eq, getTableColumns, notExists, sql } from 'drizzle-orm';
import type { SelectedFieldsFlat } from 'drizzle-orm/pg-core';
import { deleteSkipLocked } from './deleteSkipLocked.js';
import { keyLockArgs } from './keyLock.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { renderedStatement } from './renderedStatement.js';
import { type IdempotencyKeyRow, idempotencyKeys as keys } from './schema.js';
import { sqlEpochMs, sqlLater, sqlNow } from './sqlTime.js';

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
  /**
   * The longest a claim waits for another transaction that holds the key's row (transaction
   * mode: a duplicate waits for the first call to commit), in milliseconds; past it the
   * claim fails with Postgres' `lock_not_available` (55P03). Set inside the claim statement
   * itself (`lock_timeout`, transaction-local) and put back to the caller's value by the same
   * statement, so it costs no statement of its own and later statements keep the app's
   * setting.
   * @default undefined (Postgres' `lock_timeout`, unchanged)
   */
  lockWaitMs?: number;
  /**
   * The caller has just read that the key is not completed (transaction mode's read
   * before its transaction): a claim first tries a plain `INSERT … ON CONFLICT DO NOTHING`,
   * a statement far cheaper to build than the full claim (which a store made for one
   * transaction builds on every request), and runs the full claim only when the key
   * exists after all.
   * @default false
   */
  expectNewKeys?: boolean;
}

/**
 * A claim only loops when the record changed under it: a concurrent claim inserted the key
 * after its snapshot, or took over or reset the row between its two statements.
 */
const MAX_CLAIM_ROUNDS = 100;

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

/**
 * An `IdempotencyStore` on the `idem_keys` table, for any Drizzle Postgres database or
 * transaction (postgres-js, PGlite, node-postgres, …). Run `migrate(db)` first.
 *
 * Pass a transaction to make claims and completions part of it (transaction mode); pass
 * the database for autocommit statements (lease mode).
 *
 * Every statement is built once, when the store is made, with `sql.placeholder` for what
 * changes per call, and run as a named prepared query (`.prepare(name)`): no SQL is built on
 * the request path, and postgres-js prepares each statement once per connection and then
 * sends it in one round trip.
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
  return createDrizzleStore(db, options, false);
}

/**
 * The stores transaction mode claims through, one per transaction (`storeIn(tx)`): new keys
 * expected (it has just read the key), the wait for a concurrent holder bounded by
 * `lockWaitMs`, and every claim first takes the key's transaction-scoped advisory lock
 * (`keyLockArgs`), in the claim statement itself. Duplicates queue on that lock, which the
 * holder can keep across a rollback (a session-level lock on the same key) while it
 * stores a deterministic error: the key's row alone would free them at the rollback.
 *
 * The two statements of the success path, the new key's `INSERT` and the completion, are
 * rendered once here, on `db`, and run on each transaction with its values
 * (`renderedStatement`): a store built on the transaction would build them anew for every
 * request. Everything else (a key that exists after all: a takeover, a duplicate that
 * waited) goes to a full store built on the transaction when first needed.
 */
export function transactionStores(
  db: PgDatabaseLike,
  lockWaitMs: number,
): (tx: PgDatabaseLike) => IdempotencyStore {
  const lockWait = lockWaitOf(lockWaitMs);
  const { unprepared } = prepareStatements(db, undefined, true, true);
  // The new key's creation time, the statement's "now", comes back as epoch milliseconds
  // (read through the selection below, not the table's columns); the rest of its record is
  // what core's `decideClaim` makes of a key that does not exist, claimed at that instant.
  const insertNew = once(() =>
    renderedStatement(
      'idem_tx_insert_new',
      unprepared.insertNew({
        createdAtMs: sqlEpochMs(sql`${keys.createdAt}`).as('created_at_ms'),
      }),
      { createdAtMs: sql<number>`created_at_ms`.mapWith(Number).as('created_at_ms') },
    ),
  );
  const complete = once(() =>
    renderedStatement('idem_tx_complete', unprepared.complete(), {
      version: sql<number>`version`.as('version'),
    }),
  );

  return (tx) => {
    let full: IdempotencyStore | undefined;
    // The new key's INSERT found the key: the full claim, without that INSERT again.
    const fullStore = () => {
      full ??= createDrizzleStore(tx, { lockWaitMs }, true);
      return full;
    };
    return {
      async claim(request: ClaimRequest): Promise<ClaimResult> {
        const [row] = await insertNew().execute(tx, { ...claimValues(request), lockWait });
        if (!row) return fullStore().claim(request);
        const claimed = decideClaim(null, request, row.createdAtMs);
        if (claimed.status !== 'claimed')
          throw new Error('decideClaim refused a key that does not exist');
        return { status: 'claimed', takeover: false, record: claimed.next };
      },
      async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
        const updated = await complete().execute(tx, {
          ...incarnation(token),
          outcome: JSON.stringify(outcome),
          ttlMs,
        });
        throwIfFencedOut(updated, token);
      },
      release: (token) => fullStore().release(token),
      heartbeat: (token, leaseMs) => fullStore().heartbeat(token, leaseMs),
      saveStep: (token, name, value) => fullStore().saveStep(token, name, value),
      get: (scope, key) => fullStore().get(scope, key),
      sweep: (options) => fullStore().sweep(options),
    };
  };
}

/** A fenced statement that changed no row: `token` no longer holds the key. */
function throwIfFencedOut(updated: readonly unknown[], token: LeaseToken): void {
  if (updated.length === 0) throw new LeaseLostError(token.scope, token.key, token.version);
}

/** `lock_timeout` for a wait of `lockWaitMs`, as the claim statements bind it. */
const lockWaitOf = (lockWaitMs: number) => `${Math.max(1, Math.ceil(lockWaitMs))}ms`;

function createDrizzleStore(
  db: PgDatabaseLike,
  options: DrizzleStoreOptions,
  keyLock: boolean,
): IdempotencyStore {
  const statements = prepareStatements(
    db,
    options.clock,
    options.lockWaitMs !== undefined,
    keyLock,
  );
  const { clock } = options;
  /** The values every statement binds: the injected clock's "now", when there is one. */
  const lockWait = options.lockWaitMs === undefined ? undefined : lockWaitOf(options.lockWaitMs);
  const bind = <T extends object>(values: T): T & { now?: string } =>
    clock ? { ...values, now: new Date(clock.now()).toISOString() } : values;

  /**
   * Statement 1 of a claim: insert the key if it is new, else read the existing row, with
   * the statement's "now".
   */
  const insertOrRead = async (request: ClaimRequest) => {
    const [row] = await statements
      .claim()
      .execute(bind({ ...claimValues(request), ...(lockWait && { lockWait }) }));
    if (!row) return undefined;
    const { inserted, nowMs, restored: _, ...columns } = row;
    return { inserted: inserted === true, record: toRecord(columns), nowMs: Number(nowMs) };
  };

  /** One fenced UPDATE: changes the row only for the live holder of `token`. */
  const fenced = async (
    statement: { execute(values: Record<string, unknown>): Promise<unknown[]> },
    token: LeaseToken,
    values: Record<string, unknown> = {},
  ) => {
    throwIfFencedOut(await statement.execute(bind({ ...values, ...incarnation(token) })), token);
  };

  return {
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      if (options.expectNewKeys) {
        const [row] = await statements
          .insertNew()
          .execute(bind({ ...claimValues(request), ...(lockWait && { lockWait }) }));
        if (row) {
          const { restored: _, ...columns } = row;
          return { status: 'claimed', takeover: false, record: toRecord(columns) };
        }
      }
      for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
        const found = await insertOrRead(request);
        // Nothing: a concurrent claim inserted the key after this statement's snapshot was
        // taken (ON CONFLICT waited for it to commit), or the key was swept in between.
        if (!found) continue;
        if (found.inserted) return { status: 'claimed', takeover: false, record: found.record };
        const decision = decideClaim(found.record, request, found.nowMs);
        if (decision.status !== 'claimed') return decision; // replay, mismatch, in progress
        const [claimed] = await statements.takeOver().execute(
          // Only if it is still the row that was read.
          bind({ ...claimValues(request), ...incarnation(found.record) }),
        );
        if (claimed) {
          const record = toRecord(claimed);
          return { status: 'claimed', takeover: record.attempts > 1, record };
        }
        // Another claim (or the holder's heartbeat or completion) changed the row first.
      }
      throw new Error(
        `claim of idempotency key "${request.key}" did not settle after ${MAX_CLAIM_ROUNDS} rounds: ` +
          'the record kept changing between statements (is the database clock stepping back?)',
      );
    },

    async complete(token: LeaseToken, outcome: StoredOutcome, ttlMs: number): Promise<void> {
      await fenced(statements.complete(), token, { outcome: JSON.stringify(outcome), ttlMs });
    },

    async release(token: LeaseToken): Promise<void> {
      await fenced(statements.release(), token);
    },

    async heartbeat(token: LeaseToken, leaseMs: number): Promise<void> {
      await fenced(statements.heartbeat(), token, { leaseMs });
    },

    async saveStep(token: LeaseToken, name: string, value: JsonValue): Promise<void> {
      // Name and value travel as parameters: a step name is data, never SQL text.
      await fenced(statements.saveStep(), token, {
        stepName: name,
        stepValue: JSON.stringify(value),
      });
    },

    async get(scope: string, key: string): Promise<IdempotencyRecord | null> {
      const [row] = await statements.read().execute(bind({ scope, key }));
      if (!row) return null;
      const { nowMs, ...columns } = row;
      const record = toRecord(columns);
      return isExpired(record, Number(nowMs)) ? null : record;
    },

    async sweep({ limit }: SweepOptions): Promise<number> {
      if (!(limit >= 1)) return 0;
      const deleted = await statements.sweep().execute(bind({ limit: Math.floor(limit) }));
      return deleted.length;
    },
  };
}

/**
 * The store's statements, each built once, on first use (a store made for one transaction
 * builds only what it runs), with placeholders, and prepared on `db`. Their names tell apart the two shapes of "now" (the database's, or a bound clock value), so a driver
 * that names server-side statements (node-postgres) never sees one name with two texts.
 */
function prepareStatements(
  db: PgDatabaseLike,
  clock: Clock | undefined,
  boundLockWait: boolean,
  keyLock: boolean,
) {
  const now = sqlNow(clock, param.now);
  const suffix = `${clock ? '_at' : ''}${boundLockWait ? '_bounded' : ''}${keyLock ? '_locked' : ''}`;
  const name = (statement: string) => `idem_${statement}${suffix}`;
  const byId = and(eq(keys.scope, param.scope), eq(keys.key, param.key));
  const nowMs = sqlEpochMs(now);

  // `core`'s isExpired and isLeaseExpired, in SQL.
  const leaseExpired = sql`(${keys.lockedUntil} is null or ${keys.lockedUntil} <= ${now})`;
  const expired = sql`(${keys.expiresAt} <= ${now} and (${keys.status} = 'completed' or ${leaseExpired}))`;

  // The values of a claimed new key. With a bound, `attempts` carries it (see BOUND_LOCK_WAIT),
  // and the key lock after it, so that the lock's wait is bounded too.
  const bounded = boundLockWait ? BOUND_LOCK_WAIT : sql`select 1`;
  const attempts = keyLock
    ? sql`(select 1 from (select pg_advisory_xact_lock(${keyLockArgs(param.scope, param.key)}) from (${bounded}) as bounded) as locked)`
    : boundLockWait
      ? sql`(${BOUND_LOCK_WAIT})`
      : 1;
  const newKey = {
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
  } as const;
  // With a bound, RETURNING puts `lock_timeout` back: it runs after the insert (and its wait).
  const restored = boundLockWait ? RESTORE_LOCK_WAIT : sql<null>`null`;

  // The new key alone, with the given fields returned (and `lock_timeout` put back).
  const insertNewKey = <TFields extends SelectedFieldsFlat>(fields: TFields) =>
    db
      .insert(keys)
      .values(newKey)
      .onConflictDoNothing({ target: [keys.scope, keys.key] })
      .returning({ ...fields, restored });
  const insertNew = once(() => insertNewKey(COLUMNS).prepare(name('insert_new')));

  const claim = once(() => {
    // Read-only when the key exists: `ON CONFLICT DO NOTHING` locks nothing, so a replay, a
    // mismatch or an in-progress answer takes no transaction id and writes no WAL.
    const inserted = db.$with('inserted').as(
      db
        .insert(keys)
        .values(newKey)
        .onConflictDoNothing({ target: [keys.scope, keys.key] })
        .returning(),
    );
    // The data-modifying CTE must sit at the top level: the union is a subquery of it.
    const found = db
      .select({
        // UNION ALL matches columns by position: the same fields, in the same order, as below.
        scope: inserted.scope,
        key: inserted.key,
        fingerprint: inserted.fingerprint,
        status: inserted.status,
        version: inserted.version,
        lockedUntil: inserted.lockedUntil,
        attempts: inserted.attempts,
        outcome: inserted.outcome,
        steps: inserted.steps,
        createdAt: inserted.createdAt,
        completedAt: inserted.completedAt,
        expiresAt: inserted.expiresAt,
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
      .select({
        ...found._.selectedFields,
        restored,
      })
      .from(found)
      .prepare(name('claim'));
  });

  // Reset an expired row, or take over its lapsed lease, if it is still the row that was
  // read (version and creation time) and still expired or lapsed by this statement's
  // "now". Every expression reads the row as it was before this update. A reset starts
  // afresh (version + 1 so fencing tokens never repeat); a takeover keeps steps and
  // creation time.
  const takeOver = once(() => {
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
          eq(keys.createdAt, param.createdAt),
          sql`(${expired} or (${keys.status} = 'in_progress' and ${leaseExpired} and ${keys.fingerprint} = ${param.fingerprint}))`,
        ),
      )
      .returning()
      .prepare(name('take_over'));
  });

  const fencedUpdateOf = (set: Parameters<ReturnType<typeof db.update<typeof keys>>['set']>[0]) =>
    db
      .update(keys)
      .set(set)
      .where(
        and(
          byId,
          eq(keys.version, param.version),
          eq(keys.createdAt, param.createdAt),
          eq(keys.status, 'in_progress'),
        ),
      )
      .returning({ version: keys.version });
  const fencedUpdate = (
    statement: string,
    set: Parameters<ReturnType<typeof db.update<typeof keys>>['set']>[0],
  ) => once(() => fencedUpdateOf(set).prepare(name(statement)));
  const completion = {
    status: 'completed',
    outcome: sql`${param.outcome}::json`,
    completedAt: now,
    lockedUntil: null,
    expiresAt: sqlLater(now, param.ttlMs),
  } as const;

  const read = once(() =>
    db
      .select({ ...COLUMNS, nowMs })
      .from(keys)
      .where(byId)
      .prepare(name('read')),
  );

  // SKIP LOCKED: concurrent sweepers split the work, and a row that a claim is resetting
  // right now is left to that claim.
  const sweep = once(() =>
    deleteSkipLocked(db, keys, {
      key: [keys.scope, keys.key],
      doomed: expired,
      limit: param.limit,
    }).prepare(name('sweep')),
  );

  return {
    insertNew,
    claim,
    takeOver,
    complete: fencedUpdate('complete', completion),
    release: fencedUpdate('release', { lockedUntil: now }),
    heartbeat: fencedUpdate('heartbeat', { lockedUntil: sqlLater(now, param.leaseMs) }),
    saveStep: fencedUpdate('save_step', {
      steps: sql`${keys.steps} || jsonb_build_object(${param.stepName}::text, ${param.stepValue}::jsonb)`,
    }),
    read,
    sweep,
    /** Statements as built, unprepared, for `renderedStatement`. */
    unprepared: { insertNew: insertNewKey, complete: () => fencedUpdateOf(completion) },
  };
}

const COLUMNS = getTableColumns(keys);

/** A claim's values for the statements' placeholders. */
const claimValues = (request: ClaimRequest) => ({
  scope: request.scope,
  key: request.key,
  fingerprint: request.fingerprint,
  leaseMs: request.leaseMs,
  ttlMs: request.ttlMs,
});

/** The placeholders that name one incarnation of a key: a lease token, or a row as read. */
const incarnation = (token: LeaseToken) => ({
  scope: token.scope,
  key: token.key,
  version: token.version,
  createdAt: new Date(token.createdAt).toISOString(),
});

/** `build()` on the first call, its result on every call after. */
function once<T>(build: () => T): () => T {
  let built: { value: T } | undefined;
  return () => {
    built ??= { value: build() };
    return built.value;
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
