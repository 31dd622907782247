import { createIdempotency, isLeaseLostError } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  decideClaim,
  type IdempotencyRecord,
  type LeaseToken,
  leaseTokenOf,
  type RecordStatus,
} from '@idem/core/store';
import { manualClock } from '@idem/core/testing';
import { serverClockContract } from '@idem/core/testing/contract';
import { and, DrizzleQueryError, eq, sql } from 'drizzle-orm';
import { PostgresJsPreparedQuery } from 'drizzle-orm/postgres-js';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { hasCode } from '../src/postgres/connectionError.js';
import { directPrepared } from '../src/postgres/directQuery.js';
import { drizzleStore } from '../src/postgres/drizzleStore.js';
import { keyLockArgs } from '../src/postgres/keyLock.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { idempotencyKeys } from '../src/postgres/schema.js';
import { transactionStores } from '../src/postgres/transactionStores.js';
import {
  backends,
  connect,
  loggedDatabase,
  oneRow,
  postgresUrl,
  rows,
  untilLockWaiters,
  useDatabase,
} from './harness.js';

const LEASE_MS = 1_000;
const TTL_MS = 60_000;
const START = Date.UTC(2026, 0, 1, 12);

const request = (overrides: Partial<ClaimRequest> = {}): ClaimRequest => ({
  scope: 'user:1/orders.create',
  key: 'key-1',
  fingerprint: 'fp-a',
  leaseMs: LEASE_MS,
  ttlMs: TTL_MS,
  ...overrides,
});

const tokenOf = (result: ClaimResult): LeaseToken => {
  expect(result.status).toBe('claimed');
  return leaseTokenOf(result.record);
};

const rejection = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

const date = (epochMs: number | null) => (epochMs === null ? null : new Date(epochMs));

for (const backend of backends) {
  describe(`drizzleStore on ${backend}`, () => {
    const database = useDatabase(backend);
    const fresh = async () => {
      await database().truncate();
      const clock = manualClock(START);
      return { clock, db: database().db, store: drizzleStore(database().db, { clock }) };
    };

    /** Writes a record as-is, whatever state it is in. */
    const seed = async (record: IdempotencyRecord) => {
      await database()
        .db.insert(idempotencyKeys)
        .values({
          ...record,
          lockedUntil: date(record.lockedUntil),
          createdAt: new Date(record.createdAt),
          completedAt: date(record.completedAt),
          expiresAt: new Date(record.expiresAt),
        });
    };

    it('answers every row of the claim table exactly as decideClaim does', async () => {
      const { clock, store } = await fresh();
      const now = clock.now();
      const cases: { existing: IdempotencyRecord; input: ClaimRequest }[] = [];
      const statuses: RecordStatus[] = ['in_progress', 'completed'];
      for (const status of statuses) {
        for (const fingerprint of ['fp-a', 'fp-b']) {
          for (const lockedUntil of [null, now - 1_000, now - 1, now, now + 1, now + 1_000]) {
            for (const expiresAt of [now - 1_000, now, now + 1, now + 30_000]) {
              const key = `case-${cases.length}`;
              const existing: IdempotencyRecord = {
                scope: 'table',
                key,
                fingerprint,
                status,
                version: 3,
                lockedUntil,
                attempts: 2,
                outcome: status === 'completed' ? { kind: 'success', value: { key } } : null,
                steps: { reserve: { at: key } },
                createdAt: now - 10_000,
                completedAt: status === 'completed' ? now - 5_000 : null,
                expiresAt,
              };
              cases.push({ existing, input: request({ scope: 'table', key }) });
            }
          }
        }
      }
      const seen = new Set<string>();
      for (const { existing, input } of cases) {
        await seed(existing);
        const decision = decideClaim(existing, input, now);
        const expected: ClaimResult =
          decision.status === 'claimed'
            ? { status: 'claimed', takeover: decision.takeover, record: decision.next }
            : decision;
        const actual = await store.claim(input);
        expect(actual, JSON.stringify(existing)).toEqual(expected);
        seen.add(actual.status === 'claimed' ? `claimed/${actual.takeover}` : actual.status);
      }
      expect([...seen].sort()).toEqual([
        'claimed/false',
        'claimed/true',
        'in_progress',
        'mismatch',
        'replay',
      ]);
    });

    it('reclaims an abandoned, expired record with version + 1 and no steps', async () => {
      const { clock, store } = await fresh();
      const zombie = tokenOf(await store.claim(request({ ttlMs: 500 })));
      await store.saveStep(zombie, 'charge', 'ch_1');
      clock.advance(LEASE_MS);
      const result = await store.claim(request({ fingerprint: 'fp-b' }));
      expect(result).toMatchObject({ status: 'claimed', takeover: false });
      expect(result.record).toMatchObject({
        version: 2,
        attempts: 1,
        steps: {},
        fingerprint: 'fp-b',
      });

      // The holder from before the reset is fenced out of every write.
      const errors = await Promise.all([
        rejection(store.complete(zombie, { kind: 'success', value: 'late' }, TTL_MS)),
        rejection(store.release(zombie)),
        rejection(store.heartbeat(zombie, LEASE_MS)),
        rejection(store.saveStep(zombie, 'charge', 'ch_2')),
      ]);
      for (const error of errors) expect(isLeaseLostError(error)).toBe(true);
      expect(await store.get(zombie.scope, zombie.key)).toEqual(result.record);
    });

    it('stores outcomes and steps as JSON objects, not as encoded strings', async () => {
      const { db, store } = await fresh();
      const token = tokenOf(await store.claim(request()));
      await store.saveStep(token, 'charge', { id: 'ch_1' });
      await store.complete(token, { kind: 'success', value: { orderId: 7 } }, TTL_MS);
      const [row] = await db
        .select({
          outcome: sql<string>`json_typeof(${idempotencyKeys.outcome})`,
          orderId: sql<string>`${idempotencyKeys.outcome} #>> '{value,orderId}'`,
          steps: sql<string>`jsonb_typeof(${idempotencyKeys.steps})`,
          chargeId: sql<string>`${idempotencyKeys.steps} #>> '{charge,id}'`,
        })
        .from(idempotencyKeys);
      expect(row).toEqual({ outcome: 'object', orderId: '7', steps: 'object', chargeId: 'ch_1' });
    });

    it('treats step names as data, never as SQL', async () => {
      const { store } = await fresh();
      const token = tokenOf(await store.claim(request()));
      const names = [`x'); drop table idem_keys; --`, '"quoted"', '$1', 'a\\b', '{}'];
      for (const name of names) await store.saveStep(token, name, name);
      expect((await store.get(token.scope, token.key))?.steps).toEqual(
        Object.fromEntries(names.map((name) => [name, name])),
      );
    });

    it('fails cleanly on step strings jsonb cannot hold (U+0000, lone surrogates)', async () => {
      const { store } = await fresh();
      const token = tokenOf(await store.claim(request()));
      for (const text of ['a\u0000b', '\ud800']) {
        expect(await rejection(store.saveStep(token, 'step', text))).toBeInstanceOf(Error);
      }
      // Nothing was written: the holder still owns the key and can finish. The outcome
      // column is json, which keeps such text as written.
      expect(await store.get(token.scope, token.key)).toMatchObject({
        status: 'in_progress',
        steps: {},
      });
      await store.complete(token, { kind: 'success', value: { text: 'a\u0000b' } }, TTL_MS);
      expect((await store.claim(request())).record.outcome).toEqual({
        kind: 'success',
        value: { text: 'a\u0000b' },
      });
    });

    it('replays U+0000 and lone surrogates exactly through the engine’s serializer', async () => {
      const { clock, store } = await fresh();
      const idempotency = createIdempotency({ store, clock });
      const value = { text: 'a\u0000b\ud800', 'k\u0000': ['\udfff'] };
      const request = { scope: 'user:1/echo', key: 'nul-1', input: 1 };
      await idempotency.execute(request, async (ctx) => {
        await ctx.step('echo', () => value);
        return value;
      });
      const replay = await idempotency.execute(request, () => 'must not run');
      expect(replay).toEqual({ value, replayed: true, version: 1 });
    });

    it('joins the caller’s transaction: a rollback takes the claim with it', async () => {
      const { clock, db, store } = await fresh();
      await expect(
        db.transaction(async (tx) => {
          const inTx = drizzleStore(tx, { clock });
          const token = tokenOf(await inTx.claim(request()));
          await inTx.complete(token, { kind: 'success', value: 1 }, TTL_MS);
          tx.rollback();
        }),
      ).rejects.toThrow();
      expect(await store.get('user:1/orders.create', 'key-1')).toBeNull();

      await db.transaction(async (tx) => {
        const inTx = drizzleStore(tx, { clock });
        const token = tokenOf(await inTx.claim(request()));
        await inTx.complete(token, { kind: 'success', value: 2 }, TTL_MS);
      });
      expect((await store.claim(request())).status).toBe('replay');
    });

    it('answers a replay, a mismatch and a live lease read-only: no transaction id, no lock', async () => {
      const { clock, db, store } = await fresh();
      const done = tokenOf(await store.claim(request({ key: 'done' })));
      await store.complete(done, { kind: 'success', value: 1 }, TTL_MS);
      tokenOf(await store.claim(request({ key: 'busy' })));
      // A transaction gets an id with its first write or row lock, and only a transaction
      // with an id writes a commit record and waits for a WAL flush. Row locks need an id
      // too (the locker's xid goes into the row), so "no id" also means "no lock".
      const xid = async (tx: typeof db) => {
        const [row] = await rows<{ xid: string | null }>(
          tx,
          sql`select pg_current_xact_id_if_assigned()::text as xid`,
        );
        return row?.xid ?? null;
      };
      await db.transaction(async (tx) => {
        const inTx = drizzleStore(tx, { clock });
        for (let i = 0; i < 50; i++) {
          expect((await inTx.claim(request({ key: 'done' }))).status).toBe('replay');
          expect((await inTx.claim(request({ key: 'done', fingerprint: 'fp-b' }))).status).toBe(
            'mismatch',
          );
          expect((await inTx.claim(request({ key: 'busy' }))).status).toBe('in_progress');
        }
        expect(await xid(tx)).toBeNull();
        // The probe does see writes: a new key is one.
        tokenOf(await inTx.claim(request({ key: 'new' })));
        expect(await xid(tx)).not.toBeNull();
      });
    });

    it('takes over a lapsed lease and resets an expired record with a second, conditional statement', async () => {
      const { clock, store } = await fresh();
      const first = tokenOf(await store.claim(request()));
      await store.saveStep(first, 'charge', 'ch_1');
      clock.advance(LEASE_MS);
      const second = await store.claim(request());
      expect(second).toMatchObject({ status: 'claimed', takeover: true });
      expect(second.record).toMatchObject({ version: 2, attempts: 2, steps: { charge: 'ch_1' } });
      // The first holder is fenced out; the new one is not taken over again before its lease ends.
      expect(isLeaseLostError(await rejection(store.release(first)))).toBe(true);
      expect((await store.claim(request())).status).toBe('in_progress');

      // A claimant that read the row before the takeover loses cleanly and answers from
      // the row as it is now.
      const stale = drizzleStore(database().db, { clock });
      clock.advance(LEASE_MS);
      const [a, b] = await Promise.all([stale.claim(request()), store.claim(request())]);
      expect([a.status, b.status].sort()).toEqual(['claimed', 'in_progress']);
      const winner = a.status === 'claimed' ? a : b;
      expect(winner.record).toMatchObject({ version: 3, attempts: 3 });
    });

    it('with expectNewKeys, claims a new key with a plain INSERT and answers an existing one through the full claim', async () => {
      const { clock, db } = await fresh();
      const logged = drizzleStore(db, { clock, expectNewKeys: true, lockWaitMs: 1_000 });
      const plain = drizzleStore(db, { clock });
      const first = await logged.claim(request());
      expect(first).toMatchObject({ status: 'claimed', takeover: false, record: { version: 1 } });
      await logged.complete(leaseTokenOf(first.record), { kind: 'success', value: 7 }, TTL_MS);
      expect(await logged.claim(request())).toMatchObject({
        status: 'replay',
        record: { outcome: { kind: 'success', value: 7 } },
      });
      expect((await logged.claim(request({ fingerprint: 'fp-b' }))).status).toBe('mismatch');
      // An abandoned key is taken over as by any store.
      const abandoned = await plain.claim(request({ key: 'key-2' }));
      clock.advance(LEASE_MS);
      expect(await logged.claim(request({ key: 'key-2' }))).toMatchObject({
        status: 'claimed',
        takeover: true,
        record: { version: abandoned.record.version + 1, attempts: 2 },
      });
      // In a transaction, the bound on the lock wait never outlives the claim statement.
      await db.transaction(async (tx) => {
        const inTx = drizzleStore(tx, { clock, expectNewKeys: true, lockWaitMs: 1_000 });
        const lockTimeout = async () =>
          (
            await oneRow<{ value: string }>(
              tx,
              sql`select current_setting('lock_timeout') as value`,
            )
          ).value;
        const before = await lockTimeout();
        expect((await inTx.claim(request({ key: 'key-3' }))).status).toBe('claimed');
        expect(await lockTimeout()).toBe(before);
        expect((await inTx.claim(request({ key: 'key-3' }))).status).toBe('in_progress');
        expect(await lockTimeout()).toBe(before);
      });
    });

    it('transactionStores: the statements rendered once claim and complete in each transaction, as the row says', async () => {
      await database().truncate();
      const { db } = database();
      const storeIn = transactionStores(db, 1_000);
      for (const key of ['tx-1', 'tx-2']) {
        const claimed = await db.transaction(async (tx) => {
          const store = storeIn(tx);
          const claim = await store.claim(request({ key, leaseMs: 60_000 }));
          const token = tokenOf(claim);
          await store.complete(token, { kind: 'success', value: { key } }, TTL_MS);
          return claim;
        });
        // The new key's record is the row as stored, not a guess: its times to the millisecond.
        const stored = await drizzleStore(db).get(request().scope, key);
        expect(stored).toMatchObject({
          status: 'completed',
          version: 1,
          attempts: 1,
          createdAt: claimed.record.createdAt,
          outcome: { kind: 'success', value: { key } },
        });
        expect(claimed.record).toMatchObject({ version: 1, attempts: 1, steps: {}, outcome: null });
        expect(claimed.record.lockedUntil).toBe(claimed.record.createdAt + 60_000);
        expect(claimed.record.expiresAt).toBe(claimed.record.createdAt + TTL_MS);
      }
      // A key that exists goes through the full claim on the same transaction: a replay.
      const again = await db.transaction(async (tx) => storeIn(tx).claim(request({ key: 'tx-1' })));
      expect(again).toMatchObject({ status: 'replay', record: { version: 1 } });
      // A completion fenced by a stale token changes nothing and says so, and its transaction
      // cannot commit after it: the statement failed inside Postgres, so a COMMIT sent behind
      // it before its answer rolls back.
      const stale = { ...leaseTokenOf(again.record), version: 7 };
      let lost: unknown;
      const ended = await rejection(
        db.transaction(async (tx) => {
          lost = await rejection(
            storeIn(tx).complete(stale, { kind: 'success', value: 0 }, TTL_MS),
          );
        }),
      );
      expect(isLeaseLostError(lost)).toBe(true);
      expect(ended).toBeInstanceOf(Error);
      expect(await drizzleStore(db).get(request().scope, 'tx-1')).toMatchObject({
        status: 'completed',
        version: 1,
        outcome: { kind: 'success', value: { key: 'tx-1' } },
      });
    });

    if (backend === 'Postgres') {
      it('transactionStores: each rendered statement is prepared once per connection, not parsed per call', async () => {
        await database().truncate();
        const db = connect(postgresUrl(database().url), 1);
        try {
          const storeIn = transactionStores(db, 1_000);
          for (const key of ['p-1', 'p-2', 'p-3']) {
            await db.transaction(async (tx) => {
              const store = storeIn(tx);
              await store.complete(
                tokenOf(await store.claim(request({ key }))),
                { kind: 'success', value: 1 },
                TTL_MS,
              );
            });
          }
          // One connection: the session that ran all three transactions.
          const prepared = await rows<{ statement: string }>(
            db,
            sql`select statement from pg_prepared_statements where statement like 'with "idem_tx_%'`,
          );
          expect(prepared.map((row) => /^with "(\w+)"/.exec(row.statement)?.[1]).sort()).toEqual([
            'idem_tx_complete',
            'idem_tx_insert_new',
          ]);
        } finally {
          await db.$client.end({ timeout: 5 });
        }
      });
    }

    if (backend === 'Postgres') {
      it('transactionStores: a free key lock is taken without the bound; a held one is waited for within it, and the caller keeps its lock_timeout', async () => {
        await database().truncate();
        const url = postgresUrl(database().url);
        const db = connect(url, 2);
        // Holds a key's lock as a stored failure does between its rollback and its upsert.
        const holder = connect(url, 1);
        const lock = (key: string) => keyLockArgs(request().scope, key);
        const settings = (tx: PgDatabaseLike) =>
          oneRow<{ lockTimeout: string; saved: string | null }>(
            tx,
            sql`select current_setting('lock_timeout') as "lockTimeout",
                  nullif(current_setting('idem.lock_timeout', true), '') as saved`,
          );
        // The caller's own lock_timeout, set in the transaction the claim runs in.
        const claimIn = (lockWaitMs: number, key: string) =>
          db.transaction(async (tx) => {
            await tx.execute(sql`set local lock_timeout = '7s'`);
            const claim = await transactionStores(db, lockWaitMs)(tx).claim(request({ key }));
            return { claim, after: await settings(tx) };
          });
        try {
          // A free key: its lock taken at once, no setting touched.
          expect(await claimIn(30_000, 'free')).toMatchObject({
            claim: { status: 'claimed' },
            after: { lockTimeout: '7s', saved: null },
          });
          // Held for longer than the bound: lock_not_available, as a duplicate's wait ends.
          await holder.execute(sql`select pg_advisory_lock(${lock('held')})`);
          const refused = await rejection(claimIn(200, 'held'));
          expect(hasCode(refused, '55P03')).toBe(true);
          // Let go within the bound: the claim inserts the key, and the bound is put back.
          const waited = claimIn(30_000, 'held');
          await untilLockWaiters(url, (waiting) => waiting === 1, {
            what: 'the claim to wait on the key lock',
          });
          await holder.execute(sql`select pg_advisory_unlock(${lock('held')})`);
          expect(await waited).toMatchObject({
            claim: { status: 'claimed' },
            after: { lockTimeout: '7s', saved: '7s' },
          });
        } finally {
          await holder.$client.end({ timeout: 5 });
          await db.$client.end({ timeout: 5 });
        }
      });
    }

    describe('on the database clock', () => {
      const storeOnDatabaseClock = async () => {
        await database().truncate();
        return drizzleStore(database().db);
      };
      const databaseNow = async () => {
        const [row] = await rows<{ now: string }>(
          database().db,
          sql`select (extract(epoch from statement_timestamp()) * 1000)::bigint::text as now`,
        );
        return Number(row?.now);
      };

      serverClockContract(`drizzleStore on ${backend}`, async () => ({
        store: await storeOnDatabaseClock(),
        serverNow: databaseNow,
      }));

      it('takes over at once after release, and starts afresh after a zero TTL', async () => {
        const store = await storeOnDatabaseClock();
        const first = tokenOf(await store.claim(request({ leaseMs: 60_000 })));
        await store.saveStep(first, 'charge', 'ch_1');
        await store.release(first);
        const second = await store.claim(request({ leaseMs: 60_000 }));
        expect(second).toMatchObject({ status: 'claimed', takeover: true });
        expect(second.record).toMatchObject({ version: 2, steps: { charge: 'ch_1' } });

        await store.complete(tokenOf(second), { kind: 'success', value: 'done' }, 0);
        expect(await store.get(first.scope, first.key)).toBeNull();
        const third = await store.claim(request());
        expect(third).toMatchObject({ status: 'claimed', takeover: false });
        expect(third.record).toMatchObject({ version: 3, attempts: 1, steps: {} });
      });

      it('sweeps what has expired by the database clock', async () => {
        const store = await storeOnDatabaseClock();
        await store.complete(
          tokenOf(await store.claim(request({ key: 'gone' }))),
          {
            kind: 'success',
            value: 1,
          },
          0,
        );
        await store.complete(
          tokenOf(await store.claim(request({ key: 'kept' }))),
          {
            kind: 'success',
            value: 2,
          },
          TTL_MS,
        );
        expect(await store.sweep({ limit: 10 })).toBe(1);
        expect(await store.get('user:1/orders.create', 'kept')).not.toBeNull();
      });
    });

    if (backend === 'Postgres') {
      describe('under real concurrency', () => {
        /** `count` separate postgres-js clients of one connection each. */
        const clients = (count: number, url: string) =>
          Array.from({ length: count }, () => connect(url, 1));

        it('gives 200 claims of one key from 20 connections exactly one winner', async () => {
          await database().truncate();
          const dbs = clients(20, postgresUrl(database().url));
          try {
            const stores = dbs.map((db) => drizzleStore(db));
            /** 200 claims of `hot` at once: ten rounds of one from each connection, in turn. */
            const claimHot = () =>
              Promise.all(
                Array.from({ length: 10 }, () =>
                  stores.map((store) => store.claim(request({ key: 'hot', leaseMs: 60_000 }))),
                ).flat(),
              );
            const results = await claimHot();
            const statuses = results.map((result) => result.status);
            expect(statuses.filter((status) => status === 'claimed')).toHaveLength(1);
            expect(statuses.filter((status) => status === 'in_progress')).toHaveLength(199);
            const [row] = await database()
              .db.select()
              .from(idempotencyKeys)
              .where(eq(idempotencyKeys.key, 'hot'));
            expect(row).toMatchObject({ version: 1, attempts: 1 });

            // The same race for a lapsed lease: exactly one takeover.
            await database()
              .db.update(idempotencyKeys)
              .set({ lockedUntil: sql`now() - interval '1 second'` })
              .where(eq(idempotencyKeys.key, 'hot'));
            const takeovers = await claimHot();
            const winners = takeovers.filter((result) => result.status === 'claimed');
            expect(winners).toHaveLength(1);
            expect(winners[0]).toMatchObject({
              takeover: true,
              record: { version: 2, attempts: 2 },
            });
            expect(takeovers.filter((result) => result.status === 'in_progress')).toHaveLength(199);
          } finally {
            await Promise.all(dbs.map((db) => db.$client.end()));
          }
        });

        it('sweeps past rows that another transaction has locked (SKIP LOCKED)', async () => {
          const { db, store } = await fresh();
          for (const key of ['a', 'b', 'c']) {
            await store.complete(
              tokenOf(await store.claim(request({ key }))),
              {
                kind: 'success',
                value: key,
              },
              1,
            );
          }
          let release!: () => void;
          const released = new Promise<void>((resolve) => {
            release = resolve;
          });
          let locked!: () => void;
          const isLocked = new Promise<void>((resolve) => {
            locked = resolve;
          });
          const holder = db.transaction(async (tx) => {
            await tx
              .select()
              .from(idempotencyKeys)
              .where(
                and(
                  eq(idempotencyKeys.scope, 'user:1/orders.create'),
                  eq(idempotencyKeys.key, 'b'),
                ),
              )
              .for('update');
            locked();
            await released;
          });
          await isLocked;
          const clock = manualClock(START + 10);
          try {
            expect(await drizzleStore(db, { clock }).sweep({ limit: 10 })).toBe(2);
          } finally {
            release();
            await holder;
          }
          expect(await drizzleStore(db, { clock }).sweep({ limit: 10 })).toBe(1);
        });
      });
    }
  });
}

describe('drizzleStore on postgres-js: statements sent straight to the driver', () => {
  const database = useDatabase('Postgres');

  it('answers what Drizzle answers, and leaves a database with a logger to Drizzle', async () => {
    await database().truncate();
    const heard: string[] = [];
    const logged = loggedDatabase(database(), { logQuery: (query) => heard.push(query) });
    try {
      const direct = drizzleStore(database().db);
      const viaDrizzle = drizzleStore(logged.db);
      // The direct path is taken where it may be, and only there.
      const prepared = database().db.select().from(idempotencyKeys).prepare('idem_test_direct');
      expect(directPrepared(prepared, database().db)).not.toBe(prepared);
      const loggedPrepared = logged.db.select().from(idempotencyKeys).prepare('idem_test_logged');
      expect(directPrepared(loggedPrepared, logged.db)).toBe(loggedPrepared);
      // Drizzle's own execution runs none of the store's statements, in lease mode or in a
      // transaction (transaction mode's rendered insert and completion), and all of the
      // logged database's.
      const drizzleRuns = vi.spyOn(PostgresJsPreparedQuery.prototype, 'execute');
      onTestFinished(() => drizzleRuns.mockRestore());
      await database().db.transaction(async (tx) => {
        const inTx = transactionStores(database().db, 1_000)(tx);
        const held = await inTx.claim(request({ key: 'in-tx' }));
        await inTx.complete(tokenOf(held), { kind: 'success', value: 1 }, TTL_MS);
      });
      expect(drizzleRuns).not.toHaveBeenCalled();

      const claimed = await direct.claim(request({ key: 'direct', ttlMs: TTL_MS }));
      expect(claimed).toMatchObject({ status: 'claimed', takeover: false });
      await direct.saveStep(tokenOf(claimed), 'charge', { id: 'ch_1', amount: 12.5 });
      await direct.complete(tokenOf(claimed), { kind: 'success', value: { ok: true } }, TTL_MS);
      const read = await direct.get('user:1/orders.create', 'direct');
      expect(read).toEqual(await viaDrizzle.get('user:1/orders.create', 'direct'));
      expect(read).toMatchObject({
        status: 'completed',
        version: 1,
        steps: { charge: { id: 'ch_1', amount: 12.5 } },
        outcome: { kind: 'success', value: { ok: true } },
      });
      expect(await direct.claim(request({ key: 'direct' }))).toEqual(
        await viaDrizzle.claim(request({ key: 'direct' })),
      );
      // Drizzle ran the logged store's statements (the get; the claim's INSERT, which found
      // the key, and its read): its logger heard them.
      expect(heard).toHaveLength(3);
      expect(drizzleRuns).toHaveBeenCalledTimes(3);

      // A failure comes wrapped as Drizzle wraps it: the driver's error, with its code, as
      // the cause of a DrizzleQueryError.
      const error = await rejection(
        direct.claim(request({ key: 'bad', leaseMs: Number.POSITIVE_INFINITY })),
      );
      expect(error).toBeInstanceOf(DrizzleQueryError);
      expect((error as DrizzleQueryError).cause).toHaveProperty('code');
    } finally {
      await logged.close();
    }
  });
});
