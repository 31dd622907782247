import { isConnectionError } from './connectionError.js';
import type { PgDatabaseLike, TransactionOf } from './PgDatabaseLike.js';

/**
 * How long a transaction's callback, failed with a connection-level error, waits for the
 * driver to end the transaction by itself. postgres.js ends it in the same turn of the event
 * loop as it reports the error (see {@link endedWithItsConnection}); the wait runs out only
 * where the driver waits for the callback before it ends the transaction (Drizzle's
 * node-postgres session does) or where the connection was not lost after all (an 08 error
 * that dblink or postgres_fdw raised about another server): the callback then fails as any
 * other. It waits on the driver's I/O, so on the real timers, not on the engine's clock.
 */
const DRIVER_END_WAIT_MS = 100;

/**
 * Whether the transaction's callback failed because its connection is gone and the driver
 * has already ended the transaction without it: then the callback must never settle.
 *
 * postgres.js's `begin()` races the callback against the connection's close and rejects as
 * soon as the socket closes; but when the callback settles after that, it still sends
 * `rollback` (or `commit`) on that connection, whose socket is gone, and the driver throws
 * from the timer that would have written it (`TypeError: Cannot read properties of null
 * (reading 'write')`): an uncaughtException, which ends a process with Node's default
 * handlers. The write it failed also stays buffered, and every later reconnection of that
 * pooled connection stalls behind it until the connect timeout. The caller already has
 * `begin()`'s rejection, so a callback left pending loses nothing, and nothing refers to
 * it once the driver let go: it is collected with its transaction.
 *
 * Only a connection-level error (also as the cause of a released result) waits, so an
 * ordinary failure costs nothing. A failure the error policy would store asks here too
 * before anything is sent: with the connection gone it is released instead, and with the
 * connection still there (the wait ran out) it is stored as before.
 */
export async function endedWithItsConnection(
  error: unknown,
  driverEnded: Promise<void> | undefined,
): Promise<boolean> {
  if (!driverEnded || !isConnectionError(error)) return false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), DRIVER_END_WAIT_MS);
  });
  try {
    return await Promise.race([driverEnded.then(() => true), waited]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise that never settles: see {@link endedWithItsConnection}. */
export function parked<T>(): Promise<T> {
  return new Promise<T>(() => {});
}

/**
 * `db.transaction(work)`, except that once the driver has given the transaction up with its
 * lost connection, `work` is never let to settle (see {@link endedWithItsConnection}): so the
 * driver sends no `ROLLBACK` or `COMMIT` to the closed socket, which with postgres.js would
 * throw from a timer and end the process. The caller gets the driver's own rejection (its
 * connection error); whatever `work` would have answered is lost with the transaction.
 *
 * Where the driver waits for `work` to settle before it ends the transaction (node-postgres,
 * PGlite), `work` settles as it would have, after the short wait.
 */
export function transactionOnItsConnection<TDb extends PgDatabaseLike, T>(
  db: TDb,
  work: (tx: TransactionOf<TDb>) => Promise<T>,
): Promise<T> {
  const driver: DriverHold = { ended: false, done: undefined };
  const transaction = db.transaction(async (tx) => {
    let value: T;
    try {
      value = await work(heldTransaction(tx as TransactionOf<TDb>, driver));
    } catch (error) {
      if (driver.ended || (await endedWithItsConnection(error, driver.done))) return parked<T>();
      throw error;
    }
    // A connection closed while `work` did something else (an idle transaction the server
    // ended): the driver's COMMIT would go to the closed socket.
    if (driver.ended) return parked<T>();
    return value;
  }) as Promise<T>;
  watchEnd(driver, transaction);
  return transaction;
}

/** The driver's hold on one transaction, as the calls above track it. */
export interface DriverHold {
  /** Whether the driver has ended the transaction (lost, committed or rolled back). */
  ended: boolean;
  /** What the driver ended it with, when it failed (its connection error, as a rule). */
  error?: unknown;
  /** Settles when the driver has ended the transaction, whether the callback has or not. */
  done: Promise<void> | undefined;
}

/** Tracks in `driver` the end of `transaction`, the promise `db.transaction()` returned. */
export function watchEnd(driver: DriverHold, transaction: Promise<unknown>): void {
  driver.done = transaction.then(
    () => {
      driver.ended = true;
    },
    (error: unknown) => {
      driver.ended = true;
      driver.error = error;
    },
  );
}

/**
 * `tx` as idem hands it to a handler: once the driver has ended the transaction, every
 * method of `tx` throws (an error whose cause is the driver's) instead of sending a
 * statement. A handler that goes on after its connection was lost (it caught the failure,
 * or it was awaiting something else while the server ended an idle transaction) would
 * otherwise send on a connection whose socket is gone, and postgres.js throws from a timer
 * there (an uncaughtException), or sends the statement on the connection it reopened,
 * outside any transaction. A query built before the end and awaited after it is not caught
 * here: build and await a statement in one go.
 */
export function heldTransaction<TTx extends object>(tx: TTx, driver: DriverHold): TTx {
  return new Proxy(tx, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || !driver.ended) return value;
      return () => {
        throw new Error(
          'This transaction has ended (its connection was lost, or it was committed or rolled ' +
            'back): nothing more can be sent through it.',
          { cause: driver.error },
        );
      };
    },
  });
}
