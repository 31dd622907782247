import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isConnectionError } from '../../src/postgres/connectionError.js';
import type { PgDatabaseLike } from '../../src/postgres/PgDatabaseLike.js';
import { deferred } from '../fixtures/deferred.js';
import {
  type Adapter,
  type Answer,
  type Handling,
  keyedRequests,
  type Mode,
  type Order,
  REFUSED,
} from './keyedRequest.js';
import { type DriverName, drivers, escaped, type Statement, useKillRig } from './killRig.js';

/**
 * Where the request loses its backend: at one of its statements, or while the handler waits
 * on something else between two statements of its transaction, as
 * `idle_in_transaction_session_timeout` or a pooler would end it: after its write (`idle`),
 * or before it (`idle, then writes`: the handler sends its write on the transaction the
 * driver has given up, which idem's `tx` refuses). `refuse`: the handler
 * answers a refusal the error policy stores (in transaction mode, stored after the
 * rollback: the upsert, then the key's unlock).
 */
interface Case {
  mode: Mode;
  at: Statement | 'idle' | 'idle, then writes';
  refuse: boolean;
}

const CASES: Case[] = [
  { mode: 'transaction', at: 'claim', refuse: false },
  { mode: 'transaction', at: 'handler', refuse: false },
  { mode: 'transaction', at: 'completion', refuse: false },
  { mode: 'transaction', at: 'commit', refuse: false },
  { mode: 'transaction', at: 'store', refuse: true },
  { mode: 'transaction', at: 'unlock', refuse: true },
  { mode: 'transaction', at: 'idle', refuse: false },
  { mode: 'transaction', at: 'idle', refuse: true },
  { mode: 'transaction', at: 'idle, then writes', refuse: false },
  { mode: 'lease', at: 'claim', refuse: false },
  { mode: 'lease', at: 'handler', refuse: false },
  { mode: 'lease', at: 'completion', refuse: false },
  { mode: 'lease', at: 'completion', refuse: true },
];

const TABLE = (['tRPC', 'Fetch'] as const).flatMap((adapter) =>
  CASES.map((entry) => ({ adapter: adapter as Adapter, ...entry })),
);

const statusOf = (answer: Answer) => ('status' in answer ? answer.status : 'thrown');

describe.each(Object.keys(drivers) as DriverName[])(
  'requests on %s when a backend dies',
  (driver) => {
    const rig = useKillRig();
    let client: { db: PgDatabaseLike; close: () => Promise<void> };
    let handling: Handling;

    beforeEach(() => {
      client = drivers[driver](rig().url);
      handling = { runs: new Map(), idle: { pid: deferred(), go: deferred() } };
    });
    afterEach(async () => {
      handling.idle.go.resolve();
      await client.close();
    });

    /** Kills the backend of an idle handler, and lets the handler go once the driver knows. */
    async function killedIdle(answer: Promise<Answer>): Promise<Answer> {
      const pid = await handling.idle.pid.promise;
      await rig().killIdle(pid, answer, driver);
      handling.idle.go.resolve();
      return answer;
    }

    it.each(TABLE)(
      '$adapter, $mode mode, killed at $at (refusing: $refuse): no crash, its answer, one run, the key free after the lease, the pool alive',
      async ({ adapter, mode, at, refuse }) => {
        const requests = await keyedRequests(adapter, mode, client.db, handling);
        try {
          const key = randomUUID();
          const order: Order = { tag: randomUUID(), refuse };
          const runs = () => handling.runs.get(order.tag) ?? 0;
          const failed =
            at === 'idle' || at === 'idle, then writes'
              ? await killedIdle(
                  requests.send(key, {
                    ...order,
                    idle: at === 'idle' ? 'after-write' : 'before-write',
                  }),
                )
              : await rig().killAt(at, () => requests.send(key, order));
          expect(escaped).toEqual([]);

          // The answer: 500 (the store failed, or the handler's own error, as tRPC answers
          // it), or the handler's connection error thrown on by the Fetch handler. A lease's
          // completion may be retried on another connection, and then the answer is the
          // handler's own.
          const answered = statusOf(failed);
          const handlerAnswer = refuse ? REFUSED[adapter] : 200;
          if (answered === 'thrown') {
            expect(adapter).toBe('Fetch');
            expect(isConnectionError('thrown' in failed ? failed.thrown : undefined)).toBe(true);
          } else if (!(mode === 'lease' && at === 'completion' && answered === handlerAnswer)) {
            expect(answered).toBe(500);
          }
          const completed = answered === handlerAnswer;
          expect(runs()).toBe(at === 'claim' ? 0 : 1);
          const record = await rig().recordOf(key);
          if (mode === 'transaction' || at === 'claim') {
            expect(record).toBeUndefined();
            expect(await rig().ordersOf(order.tag)).toBe(0);
          }

          // While the key is held, a retry runs nothing; once it is free (at the latest when
          // the lease runs out), a retry runs the handler: one run per request that held it.
          // The first request after a kill may meet the driver's stale error, and run nothing.
          let retried = await requests.send(key, order);
          for (let attempt = 0; statusOf(retried) !== handlerAnswer && attempt < 3; attempt++) {
            expect([409, 500, 'thrown']).toContain(statusOf(retried));
            expect(runs()).toBe(at === 'claim' ? 0 : 1);
            if (statusOf(retried) === 409) await rig().untilNoKeyHeld(key);
            retried = await requests.send(key, order);
          }
          expect(statusOf(retried)).toBe(handlerAnswer);
          const ranAgain = completed ? 0 : 1;
          expect(runs()).toBe((at === 'claim' ? 0 : 1) + ranAgain);
          expect((await rig().recordOf(key))?.status).toBe('completed');
          const written = await rig().ordersOf(order.tag);
          if (mode === 'transaction') expect(written).toBe(refuse ? 0 : 1);
          else expect(written).toBe(at === 'completion' ? 1 + ranAgain : 1);
          expect(record === undefined || record.status !== 'completed' || completed).toBe(true);

          const replayed = await requests.send(key, order);
          expect(statusOf(replayed)).toBe(handlerAnswer);
          expect(runs()).toBe((at === 'claim' ? 0 : 1) + ranAgain);

          // The pool serves the next key.
          const next: Order = { tag: randomUUID() };
          const nextAnswer = await requests.send(randomUUID(), next);
          expect(statusOf(nextAnswer)).toBe(200);
          expect(await rig().ordersOf(next.tag)).toBe(1);
          expect(escaped).toEqual([]);
        } finally {
          await requests.close();
        }
      },
      120_000,
    );
  },
);
