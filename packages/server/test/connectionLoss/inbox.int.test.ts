import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BatchItemResult } from '../../src/outbox/inbox/handleBatch.js';
import { idempotentConsumer } from '../../src/outbox/inbox/idempotentConsumer.js';
import { isConnectionError } from '../../src/postgres/connectionError.js';
import type { PgDatabaseLike } from '../../src/postgres/PgDatabaseLike.js';
import { type Deferred, deferred } from '../fixtures/deferred.js';
import { countOf, rows } from '../harness.js';
import { type DriverName, drivers, escaped, type Statement, useKillRig } from './killRig.js';

/**
 * Where the consumer's transaction loses its backend: one of its statements (the inbox
 * rows' insert, the handler's order, the commit), or between two statements while the
 * handler waits on something else (as `idle_in_transaction_session_timeout` or a pooler
 * would end it): after its writes (`idle`) or before them (`idle, then writes`: the handler
 * sends them on the transaction the driver has given up, which the consumer's `tx` refuses).
 */
type KilledAt = Extract<Statement, 'inbox' | 'handler' | 'commit'> | 'idle' | 'idle, then writes';

/** Where an idle handler waits: after its writes, or before them. */
type Waits = 'after-write' | 'before-write' | undefined;

const CASES: { call: 'handle' | 'handleBatch'; at: KilledAt }[] = [
  { call: 'handle', at: 'inbox' },
  { call: 'handle', at: 'handler' },
  { call: 'handle', at: 'commit' },
  { call: 'handle', at: 'idle' },
  { call: 'handle', at: 'idle, then writes' },
  { call: 'handleBatch', at: 'inbox' },
  { call: 'handleBatch', at: 'handler' },
  { call: 'handleBatch', at: 'commit' },
  { call: 'handleBatch', at: 'idle' },
  { call: 'handleBatch', at: 'idle, then writes' },
];

describe.each(Object.keys(drivers) as DriverName[])(
  'the inbox on %s when a backend dies',
  (driver) => {
    const rig = useKillRig();
    let client: { db: PgDatabaseLike; close: () => Promise<void> };
    /** Runs of the handler, by event id. */
    const runs = new Map<string, number>();
    /** Where an `idle` handler says which backend it runs on, and waits to be let go. */
    let idle: { pid: Deferred<number>; go: Deferred<void> };

    beforeEach(() => {
      client = drivers[driver](rig().url);
      idle = { pid: deferred(), go: deferred() };
    });
    afterEach(async () => {
      idle.go.resolve();
      await client.close();
    });

    const consumer = () => idempotentConsumer({ db: client.db, name: 'billing' });
    /**
     * Writes one order per event and, where asked to (`idle`), then waits on something else
     * (as a call to another service would) before it returns and the driver commits.
     */
    async function handler(ids: string[], tx: PgDatabaseLike, waits: Waits) {
      for (const id of ids) runs.set(id, (runs.get(id) ?? 0) + 1);
      const wait = async () => {
        const [row] = await rows<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`);
        idle.pid.resolve(Number(row?.pid));
        await idle.go.promise;
      };
      if (waits === 'before-write') await wait();
      for (const id of ids) await tx.execute(sql`insert into loss_orders (tag) values (${id})`);
      if (waits === 'after-write') await wait();
    }
    /** One delivery of `ids`: handle (one id) or handleBatch, as its settled value or error. */
    function deliver(call: 'handle' | 'handleBatch', ids: string[], waits?: Waits) {
      const delivery: Promise<unknown> =
        call === 'handle'
          ? consumer().handle({ id: ids[0] ?? '' }, (tx) => handler(ids, tx, waits))
          : consumer().handleBatch(
              ids.map((id) => ({ id })),
              (events, tx) =>
                handler(
                  events.map((event) => event.id),
                  tx,
                  waits,
                ),
            );
      return delivery.then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
    }

    /** Kills the backend of an idle handler, and lets the handler go once the driver knows. */
    async function killedIdle<T>(delivery: Promise<T>): Promise<T> {
      const pid = await idle.pid.promise;
      await rig().killIdle(pid, delivery, driver);
      idle.go.resolve();
      return delivery;
    }

    it.each(CASES)(
      '$call killed at $at: no crash, the events failed, nothing kept, a redelivery runs once',
      async ({ call, at }) => {
        const ids = call === 'handle' ? [randomUUID()] : [randomUUID(), randomUUID(), randomUUID()];
        const failed =
          at === 'idle' || at === 'idle, then writes'
            ? await killedIdle(deliver(call, ids, at === 'idle' ? 'after-write' : 'before-write'))
            : await rig().killAt(at, () => deliver(call, ids));
        expect(escaped).toEqual([]);
        if (call === 'handle') {
          expect(failed.ok).toBe(false);
          expect(isConnectionError(failed.ok ? undefined : failed.error)).toBe(true);
        } else {
          const results = (failed.ok ? failed.value : []) as BatchItemResult[];
          expect(results.map((result) => result.status)).toEqual(ids.map(() => 'failed'));
        }
        for (const id of ids) expect(await rig().ordersOf(id)).toBe(0);
        const kept = await countOf(
          rig().observer,
          sql`select count(*)::int as n from idem_inbox where event_id in ${ids}`,
        );
        expect(kept).toBe(0);
        const ranBefore = ids.map((id) => runs.get(id) ?? 0);
        expect(Math.max(...ranBefore)).toBeLessThanOrEqual(1);

        // The redelivery: the first may meet the driver's stale error (and run nothing).
        let redelivered = await deliver(call, ids);
        if (!redelivered.ok || hasFailure(redelivered.value)) {
          expect(ids.map((id) => runs.get(id) ?? 0)).toEqual(ranBefore);
          redelivered = await deliver(call, ids);
        }
        expect(redelivered.ok).toBe(true);
        expect(hasFailure(redelivered.ok ? redelivered.value : undefined)).toBe(false);
        for (const id of ids) expect(await rig().ordersOf(id)).toBe(1);
        const again = await deliver(call, ids);
        expect(again.ok).toBe(true);
        for (const id of ids) expect(await rig().ordersOf(id)).toBe(1);
        expect(escaped).toEqual([]);
      },
      120_000,
    );
  },
);

/** Whether a handleBatch result has an event that failed. */
function hasFailure(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    (value as BatchItemResult[]).some((result) => result.status === 'failed')
  );
}
