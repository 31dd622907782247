import { PostgresJsSession, PostgresJsTransaction } from 'drizzle-orm/postgres-js/session';
import { postgresJsClientOf } from './directQuery.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { TransactionAbortedError } from './TransactionAbortedError.js';

/** A query of postgres-js, as sent here: a promise of its rows, with its command's tag. */
type Rows = Promise<unknown[] & { command?: string }>;

/** A postgres-js connection reserved from the pool (`sql.reserve()`), as used here. */
interface ReservedSql {
  unsafe(query: string, params?: unknown[], options?: Record<string, unknown>): Rows;
  release(): void;
}

/** The pool of a Drizzle postgres-js database, as used here. */
interface PostgresJsPool {
  reserve(): Promise<ReservedSql>;
}

/**
 * postgres-js's connection, as the `onexecute` option of a query hands it over: the pool
 * calls its `onclose` once when its socket closes.
 */
interface PooledConnection {
  onclose: ((error: unknown) => void) | null;
}

/** The session of a Drizzle postgres-js database, as a transaction of its own is built on. */
interface PostgresJsSessionLike {
  dialect: ConstructorParameters<typeof PostgresJsSession>[1];
  schema: ConstructorParameters<typeof PostgresJsSession>[2];
  options: ConstructorParameters<typeof PostgresJsSession>[3];
}

/** `db.transaction(work)`, as transaction mode opens each call's transaction. */
export type OpenTransaction = <T>(work: (tx: PgDatabaseLike) => Promise<T>) => Promise<T>;

/**
 * `db.transaction(work)` for transaction mode: on Drizzle's postgres-js driver with no
 * logger of the app's, a transaction on a connection reserved from the pool, whose `BEGIN`
 * is not awaited, so it goes out in one write with the first statement of `work` (the
 * claim): one round trip less per call than postgres-js's `begin()`, which waits for
 * `BEGIN`'s answer before it runs the callback. Elsewhere, `db.transaction` itself.
 *
 * `work` gets a Drizzle transaction as `db.transaction` hands one over: the same session
 * options (schema, casing, cache), nested `tx.transaction()` as savepoints, and
 * `tx.rollback()`. As with postgres-js's `begin()`, the promise rejects as soon as the
 * connection closes, even while `work` runs on (see `transactionOnItsConnection`), and
 * then nothing more is sent on that connection: not the `ROLLBACK`, and it is not given
 * back to the pool (postgres-js reconnects it when it is next needed). A `COMMIT` that
 * Postgres answers with `ROLLBACK` (a statement had failed and `work` caught it) rejects
 * with a {@link TransactionAbortedError}.
 */
export function transactionOpener(db: PgDatabaseLike): OpenTransaction {
  const pool = postgresJsClientOf(db) as Partial<PostgresJsPool> | undefined;
  const session = (db as unknown as { session?: PostgresJsSessionLike }).session;
  if (!pool || typeof pool.reserve !== 'function' || !session) {
    return (work) => db.transaction(work);
  }
  const reservable = pool as PostgresJsPool;
  return (work) => reservedTransaction(reservable, session, work);
}

async function reservedTransaction<T>(
  pool: PostgresJsPool,
  session: PostgresJsSessionLike,
  work: (tx: PgDatabaseLike) => Promise<T>,
): Promise<T> {
  const reserved = await pool.reserve();
  let connection: PooledConnection | undefined;
  const lost: Lost = { closed: false, error: undefined };
  let rejectClosed: (error: unknown) => void = () => {};
  const closedUnder = new Promise<never>((_, reject) => {
    rejectClosed = reject;
  });
  closedUnder.catch(() => {});
  const begun = reserved.unsafe('begin', [], {
    onexecute(handed: PooledConnection) {
      connection = handed;
      handed.onclose = (error) => {
        lost.closed = true;
        lost.error = error;
        rejectClosed(error);
      };
      // Tells the pool the connection takes more statements now (pipelining).
      return true;
    },
  });
  begun.catch(() => {});
  try {
    return await Promise.race([scope(guarded(reserved, lost), session, begun, work), closedUnder]);
  } finally {
    if (!lost.closed) {
      if (connection) connection.onclose = null;
      reserved.release();
    }
  }
}

/** Whether the reserved connection has closed, and with what. */
interface Lost {
  closed: boolean;
  error: unknown;
}

/**
 * `reserved`, refusing every statement once its connection has closed: postgres-js, given
 * a statement for a connection whose socket has gone, throws from a timer (an
 * uncaughtException) instead of rejecting it. The refusal is the connection's own error.
 */
function guarded(reserved: ReservedSql, lost: Lost): ReservedSql {
  return {
    unsafe(query, params, options) {
      if (!lost.closed) return reserved.unsafe(query, params, options);
      const refused = Promise.reject(lost.error);
      refused.catch(() => {});
      return Object.assign(refused, { values: () => refused });
    },
    release: () => reserved.release(),
  };
}

async function scope<T>(
  reserved: ReservedSql,
  session: PostgresJsSessionLike,
  begun: Rows,
  work: (tx: PgDatabaseLike) => Promise<T>,
): Promise<T> {
  let savepoints = 0;
  // What Drizzle's session sends on: the reserved connection, and savepoints on it for a
  // nested `tx.transaction()`, as postgres-js's `begin()` names them.
  interface ScopedSql {
    unsafe: ReservedSql['unsafe'];
    savepoint<R>(inner: (sql: ScopedSql) => Promise<R>): Promise<R>;
  }
  const client: ScopedSql = {
    unsafe: (query: string, params?: unknown[], options?: Record<string, unknown>) =>
      reserved.unsafe(query, params, options),
    async savepoint<R>(inner: (sql: ScopedSql) => Promise<R>): Promise<R> {
      const name = `s${savepoints++}`;
      await reserved.unsafe(`savepoint ${name}`);
      try {
        return await inner(client);
      } catch (error) {
        await reserved.unsafe(`rollback to ${name}`);
        throw error;
      }
    },
  };
  const txSession = new PostgresJsSession(
    client as never,
    session.dialect,
    session.schema,
    session.options,
  );
  const tx = new PostgresJsTransaction(session.dialect, txSession, session.schema);
  let result: T;
  try {
    result = await work(tx as unknown as PgDatabaseLike);
    await begun;
  } catch (error) {
    await reserved.unsafe('rollback');
    throw error;
  }
  const committed = await reserved.unsafe('commit');
  if (committed.command === 'ROLLBACK') throw new TransactionAbortedError();
  return result;
}
