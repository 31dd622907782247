import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { beforeAll, describe, expect, it } from 'vitest';
import { isConnectionError } from '../src/postgres/connectionError.js';
import { transactionOpener } from '../src/postgres/pipelinedTransaction.js';
import { TransactionAbortedError } from '../src/postgres/TransactionAbortedError.js';
import { deferred } from './fixtures/deferred.js';
import { connect, countOf, oneRow, postgresUrl, useDatabase } from './harness.js';

/**
 * Transaction mode's own transactions on postgres-js (`BEGIN` sent with the first statement,
 * on a reserved connection): what `db.transaction` promises, at the edges the handler meets.
 */
describe('transactionOpener on postgres-js', () => {
  const database = useDatabase('Postgres');
  const notes = (tag: string) =>
    countOf(database().db, sql`select count(*)::int as n from opener_notes where tag = ${tag}`);

  beforeAll(async () => {
    await database().db.execute(sql`create table if not exists opener_notes (tag text not null)`);
  });

  it('commits the work, and rolls it back when the work throws', async () => {
    const open = transactionOpener(database().db);
    expect(
      await open(async (tx) => {
        await tx.execute(sql`insert into opener_notes (tag) values ('kept')`);
        return 'done';
      }),
    ).toBe('done');
    await expect(
      open(async (tx) => {
        await tx.execute(sql`insert into opener_notes (tag) values ('dropped')`);
        throw new Error('the work fails');
      }),
    ).rejects.toThrow('the work fails');
    expect([await notes('kept'), await notes('dropped')]).toEqual([1, 0]);
  });

  it('a COMMIT that Postgres answers ROLLBACK (a failed statement was caught) rejects and commits nothing', async () => {
    const open = transactionOpener(database().db);
    const committed = open(async (tx) => {
      await tx.execute(sql`insert into opener_notes (tag) values ('aborted')`);
      await tx.execute(sql`select 1 / 0`).catch(() => undefined);
      return 'looks done';
    });
    await expect(committed).rejects.toBeInstanceOf(TransactionAbortedError);
    expect(await notes('aborted')).toBe(0);
  });

  it('sql.end() called while a transaction is open ends once that transaction has', async () => {
    const db = connect(postgresUrl(database().url), 2);
    const open = transactionOpener(db);
    const inside = deferred();
    const resume = deferred();
    const transaction = open(async (tx) => {
      await tx.execute(sql`insert into opener_notes (tag) values ('before the end')`);
      inside.resolve();
      await resume.promise;
      await tx.execute(sql`insert into opener_notes (tag) values ('before the end')`);
    });
    await inside.promise;
    // No timeout: an end() that waits for a connection nobody gives back never settles.
    const ended = db.$client.end();
    resume.resolve();
    await transaction;
    await ended;
    expect(await notes('before the end')).toBe(2);
  });

  it('a pool with fetch_types: false runs its transactions side by side', async () => {
    // postgres-js 3.4 never hands such a pool's new connection to the reserve() that opened
    // it: the second transaction would wait for the first, which waits for the second.
    const client = postgres(postgresUrl(database().url), {
      max: 2,
      fetch_types: false,
      onnotice: () => {},
    });
    try {
      const open = transactionOpener(drizzle(client));
      await open((tx) => tx.execute(sql`select 1`));
      const firstIn = deferred();
      const secondDone = deferred();
      const first = open(async (tx) => {
        await tx.execute(sql`select 1`);
        firstIn.resolve();
        await secondDone.promise;
      });
      await firstIn.promise;
      await open((tx) => tx.execute(sql`insert into opener_notes (tag) values ('side by side')`));
      secondDone.resolve();
      await first;
      expect(await notes('side by side')).toBe(1);
    } finally {
      await client.end({ timeout: 5 });
    }
  });

  it('a connection killed while the work waits on something else: rejects at once with the connection error, refuses the statements after it, and the pool goes on', async () => {
    // One connection: the pool must get it back in working order, not a dead one.
    const db = connect(postgresUrl(database().url), 1);
    try {
      const open = transactionOpener(db);
      const resume = deferred();
      const backend = deferred<number>();
      let sentAfter: unknown;
      const transaction = open(async (tx) => {
        const { pid } = await oneRow<{ pid: number }>(tx, sql`select pg_backend_pid() as pid`);
        backend.resolve(pid);
        await resume.promise;
        sentAfter = await tx.execute(sql`select 1`).then(
          () => 'sent',
          (error: unknown) => error,
        );
      });
      const rejected = transaction.then(
        () => undefined,
        (error: unknown) => error,
      );
      await database().db.execute(sql`select pg_terminate_backend(${await backend.promise})`);
      expect(isConnectionError(await rejected)).toBe(true);
      resume.resolve();
      await expect.poll(() => sentAfter).toBeDefined();
      expect(isConnectionError(sentAfter)).toBe(true);
      // The pool's one connection reconnects for the next transaction.
      expect(await open(async (tx) => oneRow<{ one: number }>(tx, sql`select 1 as one`))).toEqual({
        one: 1,
      });
    } finally {
      await db.$client.end({ timeout: 5 });
    }
  });
});
