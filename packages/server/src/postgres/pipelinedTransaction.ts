import { PostgresJsSession, PostgresJsTransaction } from 'drizzle-orm/postgres-js/session';
import { hasCode } from './connectionError.js';
import { postgresJsClientOf } from './directQuery.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';
import { IN_FAILED_SQL_TRANSACTION, TransactionAbortedError } from './TransactionAbortedError.js';

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
  /**
   * What the connection does when a statement's answer is in, while reserved: with
   * `release` false, it goes back to the pool by itself once the transaction has ended (or
   * closes, when the pool is ending), as postgres-js's own `begin()` has it.
   */
  reserved: { release?: boolean } | null;
}

/** The pool settings the reserved transaction needs (see `transactionOpener`). */
interface PoolOptions {
  fetch_types?: boolean;
  max_pipeline?: number;
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
 * `BEGIN`'s answer before it runs the callback. Elsewhere (another driver, a pool whose
 * settings `reserve()` does not serve, see `reservable`), `db.transaction` itself.
 *
 * `work` gets a Drizzle transaction as `db.transaction` hands one over: the same session
 * options (schema, casing, cache), nested `tx.transaction()` as savepoints that a failed
 * statement inside fails and rolls back (as postgres-js's own), and `tx.rollback()`. The
 * connection goes back to the pool once the transaction has ended, or is closed there when
 * `sql.end()` is waiting for it. As with postgres-js's `begin()`, the promise rejects as
 * soon as the connection closes, even while `work` runs on (see
 * `transactionOnItsConnection`), and then nothing more is sent on that connection: not the
 * `ROLLBACK`, and it is not given back to the pool (postgres-js reconnects it when it is
 * next needed). A `COMMIT` that Postgres answers with `ROLLBACK` (a statement had failed
 * and `work` caught it) rejects with a {@link TransactionAbortedError}.
 */
export function transactionOpener(db: PgDatabaseLike): OpenTransaction {
  const pool = postgresJsClientOf(db) as
    | (Partial<PostgresJsPool> & { options?: PoolOptions })
    | undefined;
  const session = (db as unknown as { session?: PostgresJsSessionLike }).session;
  if (!pool || typeof pool.reserve !== 'function' || !session || !reservable(pool.options)) {
    return (work) => db.transaction(work);
  }
  const reserving = pool as PostgresJsPool;
  return (work) => reservedTransaction(reserving, session, work);
}

/**
 * Whether a pool with these settings hands over reserved connections as this needs: with
 * `fetch_types: false`, postgres-js 3.4 never hands a connection it has just opened to
 * the `reserve()` it opened it for (the call waits for another connection to come free,
 * and the new one stays unused), and with `max_pipeline` under 1 it sends nothing behind
 * `BEGIN`, so the transaction could not watch its connection for a close.
 */
function reservable(options: PoolOptions | undefined): boolean {
  return options?.fetch_types !== false && Number(options?.max_pipeline) >= 1;
}

async function reservedTransaction<T>(
  pool: PostgresJsPool,
  session: PostgresJsSessionLike,
  work: (tx: PgDatabaseLike) => Promise<T>,
): Promise<T> {
  const reserved = await pool.reserve();
  let connection: PooledConnection | undefined;
  const lost: Lost = { closed: false, error: undefined, handedOver: false };
  let rejectClosed: (error: unknown) => void = () => {};
  const closedUnder = new Promise<never>((_, reject) => {
    rejectClosed = reject;
  });
  closedUnder.catch(() => {});
  const onclose = (error: unknown) => {
    lost.closed = true;
    lost.error = error;
    rejectClosed(error);
  };
  const begun = reserved.unsafe('begin', [], {
    onexecute(handed: PooledConnection) {
      connection = handed;
      handed.onclose = onclose;
      // Tells the pool the connection takes more statements now (pipelining).
      return true;
    },
  });
  begun.catch(() => {});
  try {
    // Before its COMMIT or ROLLBACK, the connection is handed back to postgres-js, which
    // gives it back to the pool once that has ended (or closes it, when `sql.end()` waits
    // for it): a connection released by hand would keep an ending pool waiting for ever.
    // The close is still watched until the end: a statement queued behind one that is
    // being described is neither sent nor failed when the connection closes.
    const handOver = () => {
      if (!connection?.reserved) return;
      connection.reserved.release = false;
      lost.handedOver = true;
    };
    return await Promise.race([
      scope(sendOn(reserved, lost), session, begun, handOver, work),
      closedUnder,
    ]);
  } finally {
    // Back in the pool, the connection may already be another transaction's.
    if (connection?.onclose === onclose) connection.onclose = null;
    if (!lost.closed && !lost.handedOver) reserved.release();
  }
}

/**
 * Whether the reserved connection has closed, and with what; and whether it was handed
 * back to postgres-js to give back to the pool.
 */
interface Lost {
  closed: boolean;
  error: unknown;
  handedOver: boolean;
}

/** A statement sent on the reserved connection, as `ReservedSql.unsafe` sends it. */
type Send = ReservedSql['unsafe'];

/**
 * `reserved.unsafe`, refusing every statement once its connection has closed: postgres-js,
 * given a statement for a connection whose socket has gone, throws from a timer (an
 * uncaughtException) instead of rejecting it. The refusal is the connection's own error.
 */
function sendOn(reserved: ReservedSql, lost: Lost): Send {
  return (query, params, options) => {
    if (!lost.closed) return reserved.unsafe(query, params, options);
    const refused = Promise.reject(lost.error);
    refused.catch(() => {});
    return Object.assign(refused, { values: () => refused });
  };
}

async function scope<T>(
  send: Send,
  session: PostgresJsSessionLike,
  begun: Rows,
  handOver: () => void,
  work: (tx: PgDatabaseLike) => Promise<T>,
): Promise<T> {
  let savepoints = 0;
  // What Drizzle's session sends on: the reserved connection, and savepoints on it for a
  // nested `tx.transaction()`, as postgres-js's `begin()` makes them: a statement inside
  // that failed, even one whose failure was caught, rolls the savepoint back and fails it
  // (with that statement's error), so the transaction around it goes on.
  interface ScopedSql {
    unsafe: Send;
    savepoint<R>(inner: (sql: ScopedSql) => Promise<R>): Promise<R>;
  }
  const scoped = (failures?: { first?: { error: unknown } }): ScopedSql => ({
    unsafe(query, params, options) {
      const sent = send(query, params, options);
      if (failures) {
        sent.catch((error: unknown) => {
          failures.first ??= { error };
        });
      }
      return sent;
    },
    async savepoint<R>(inner: (sql: ScopedSql) => Promise<R>): Promise<R> {
      const name = `s${savepoints++}`;
      await send(`savepoint ${name}`);
      const failures: { first?: { error: unknown } } = {};
      try {
        const result = await inner(scoped(failures));
        if (failures.first) throw failures.first.error;
        return result;
      } catch (error) {
        await send(`rollback to ${name}`);
        throw hasCode(error, IN_FAILED_SQL_TRANSACTION) && failures.first
          ? failures.first.error
          : error;
      }
    },
  });
  const client = scoped();
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
    handOver();
    await send('rollback');
    throw error;
  }
  handOver();
  const committed = await send('commit');
  if (committed.command === 'ROLLBACK') throw new TransactionAbortedError();
  return result;
}
