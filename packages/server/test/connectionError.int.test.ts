import { TRPCError } from '@trpc/server';
import { DrizzleQueryError, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isConnectionError } from '../src/postgres/connectionError.js';
import { tcpServer } from './fixtures/tcpServer.js';
import {
  connect,
  createScratchDatabase,
  rows,
  type ScratchDatabase,
  untilGateWaiter,
} from './harness.js';

/** An advisory lock the observer holds so that a statement waits, and can be ended there. */
const GATE = 727_272;

/** What `promise` rejected with; fails the test if it resolved. */
async function rejectionOf(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the statement to fail');
}

/** The chain of `code`s from the error down its causes, for the assertions' messages. */
function codesOf(error: unknown): unknown[] {
  const codes: unknown[] = [];
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    codes.push((current as { code?: unknown }).code);
    current = (current as { cause?: unknown }).cause;
  }
  return codes;
}

/**
 * What the first statement of a one-connection client of `url` fails with, connecting for
 * at most `connectTimeoutS`; the client is ended at once after.
 */
async function firstStatementFailure(url: string, connectTimeoutS: number): Promise<unknown> {
  const client = postgres(url, { max: 1, connect_timeout: connectTimeoutS, onnotice: () => {} });
  try {
    return await rejectionOf(drizzle(client).execute(sql`select 1`));
  } finally {
    await client.end({ timeout: 0 });
  }
}

describe('isConnectionError', () => {
  let scratch: ScratchDatabase;
  let observer: ReturnType<typeof connect>;

  beforeAll(async () => {
    scratch = await createScratchDatabase();
    observer = connect(scratch.url, 1);
  });

  afterAll(async () => {
    await observer?.$client.end({ timeout: 5 });
    await scratch?.drop();
  });

  /** Holds the gate while `run` starts a statement that waits on it and `end` ends it. */
  async function endedAtTheGate(
    db: ReturnType<typeof connect>,
    end: (pid: number) => Promise<unknown>,
  ): Promise<unknown> {
    await observer.execute(sql`select pg_advisory_lock(${GATE}::int8)`);
    try {
      const failed = rejectionOf(db.execute(sql`select pg_advisory_lock(${GATE}::int8)`));
      const pid = await untilGateWaiter(observer, GATE, 'the statement to wait on the gate');
      await end(pid);
      return await failed;
    } finally {
      await observer.execute(sql`select pg_advisory_unlock(${GATE}::int8)`);
    }
  }

  it('a backend killed under a statement: CONNECTION_CLOSED in a DrizzleQueryError, then the killed backend’s 57P01', async () => {
    const db = connect(scratch.url, 1);
    try {
      const killed = await endedAtTheGate(db, (pid) =>
        observer.execute(sql`select pg_terminate_backend(${pid})`),
      );
      expect(codesOf(killed)).toEqual([undefined, 'CONNECTION_CLOSED']);
      expect(killed).toBeInstanceOf(DrizzleQueryError);
      expect(isConnectionError(killed)).toBe(true);

      // postgres.js hands the FATAL error it read before the close to the next statement of
      // the reopened connection: a live connection, named by a session-ending SQLSTATE.
      const next = await rejectionOf(db.execute(sql`select 1`));
      expect(codesOf(next)).toEqual([undefined, '57P01']);
      expect(isConnectionError(next)).toBe(true);
      expect(await rows(db, sql`select 1 as one`)).toEqual([{ one: 1 }]);
    } finally {
      await db.$client.end({ timeout: 5 });
    }
  });

  it('a pool destroyed under a statement: CONNECTION_DESTROYED', async () => {
    const db = connect(scratch.url, 1);
    const destroyed = await endedAtTheGate(db, () => db.$client.end({ timeout: 0 }));
    expect(codesOf(destroyed)).toEqual([undefined, 'CONNECTION_DESTROYED']);
    expect(isConnectionError(destroyed)).toBe(true);
  });

  it('a statement on an ended pool: CONNECTION_ENDED', async () => {
    const db = connect(scratch.url, 1);
    await rows(db, sql`select 1`);
    await db.$client.end({ timeout: 5 });
    const ended = await rejectionOf(db.execute(sql`select 1`));
    expect(codesOf(ended)).toEqual([undefined, 'CONNECTION_ENDED']);
    expect(isConnectionError(ended)).toBe(true);
  });

  it('a server that accepts and never answers: CONNECT_TIMEOUT', async () => {
    const silent = await tcpServer(() => undefined);
    try {
      const timedOut = await firstStatementFailure(silent.url, 1);
      expect(codesOf(timedOut)).toEqual([undefined, 'CONNECT_TIMEOUT']);
      expect(isConnectionError(timedOut)).toBe(true);
    } finally {
      await silent.close();
    }
  });

  it('a connection the server resets, and one it refuses: the socket’s own error', async () => {
    const resetting = await tcpServer((socket) => socket.resetAndDestroy());
    try {
      const reset = await firstStatementFailure(resetting.url, 30);
      expect(['ECONNRESET', 'EPIPE']).toContain(codesOf(reset)[1]);
      expect(isConnectionError(reset)).toBe(true);
    } finally {
      await resetting.close();
    }

    // A port that was just listened on and closed: nothing listens there now.
    const gone = await tcpServer(() => undefined);
    await gone.close();
    const refused = await firstStatementFailure(gone.url, 30);
    expect(codesOf(refused)).toEqual([undefined, 'ECONNREFUSED']);
    expect(isConnectionError(refused)).toBe(true);
  });

  it('a class 08 SQLSTATE counts, whoever raised it', async () => {
    const raised = await rejectionOf(
      observer.execute(
        sql`do $$ begin raise exception 'the remote server did not answer' using errcode = '08006'; end $$`,
      ),
    );
    expect(codesOf(raised)).toEqual([undefined, '08006']);
    expect(isConnectionError(raised)).toBe(true);
  });

  it('errors after which the connection stays open do not count', async () => {
    const db = connect(scratch.url, 1);
    /** A statement that waits on the gate, in a transaction where `setting` bounds it. */
    const boundedWait = async (setting: 'lock_timeout' | 'statement_timeout') => {
      await observer.execute(sql`select pg_advisory_lock(${GATE}::int8)`);
      try {
        return await rejectionOf(
          db.transaction(async (tx) => {
            await tx.execute(sql`select set_config(${setting}, '50ms', true)`);
            await tx.execute(sql`select pg_advisory_lock(${GATE}::int8)`);
          }),
        );
      } finally {
        await observer.execute(sql`select pg_advisory_unlock(${GATE}::int8)`);
      }
    };
    try {
      await db.execute(sql`create table unique_things (id int primary key)`);
      await db.execute(sql`insert into unique_things values (1)`);
      const failures = {
        '23505': await rejectionOf(db.execute(sql`insert into unique_things values (1)`)),
        '42601': await rejectionOf(db.execute(sql`selec 1`)),
        '25P02': await rejectionOf(
          db.transaction(async (tx) => {
            await tx.execute(sql`select 1 / 0`).catch(() => undefined);
            await tx.execute(sql`select 1`);
          }),
        ),
        '55P03': await boundedWait('lock_timeout'),
        // A cancelled statement: class 57 too, but the session goes on.
        '57014': await boundedWait('statement_timeout'),
      };
      for (const [code, error] of Object.entries(failures)) {
        expect(codesOf(error)).toEqual([undefined, code]);
        expect(isConnectionError(error), code).toBe(false);
      }
      expect(await rows(db, sql`select 1 as one`)).toEqual([{ one: 1 }]);
    } finally {
      await db.$client.end({ timeout: 5 });
    }
  });

  it('looks down the chain of causes, and only at error-like values', () => {
    const closed = Object.assign(new Error('write CONNECTION_CLOSED'), {
      code: 'CONNECTION_CLOSED',
    });
    const wrapped = new TRPCError({
      code: 'INTERNAL_SERVER_ERROR',
      cause: Object.assign(new Error('Failed query'), { cause: closed }),
    });
    expect(isConnectionError(wrapped)).toBe(true);
    for (const value of [undefined, null, 'CONNECTION_CLOSED', 8006, { code: 8006 }, {}]) {
      expect(isConnectionError(value), String(value)).toBe(false);
    }
    const cyclic: { code: string; cause?: unknown } = { code: '23505' };
    cyclic.cause = cyclic;
    expect(isConnectionError(cyclic)).toBe(false);
  });
});
