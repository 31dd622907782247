import { ConfigurationError } from '@idem/core';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/**
 * A node-postgres `Client` (or a client checked out of a `Pool`), as far as idem needs it:
 * typed by shape, so that idem imports nothing from `pg`.
 */
export interface NodePostgresClientLike {
  query(text: string): Promise<unknown>;
  on(event: string, listener: (argument?: unknown) => void): unknown;
  removeListener(event: string, listener: (argument?: unknown) => void): unknown;
}

/** A node-postgres `Pool`, as far as idem needs it. */
export interface NodePostgresPoolLike {
  connect(): Promise<NodePostgresClientLike & { release(destroy?: Error | boolean): void }>;
  readonly idleCount: number;
  on(event: 'acquire', listener: (client: NodePostgresClientLike) => void): unknown;
}

const hasFunction = (value: object, name: string) =>
  typeof (value as Record<string, unknown>)[name] === 'function';

/** Whether `client` is a node-postgres `Pool` (a `Client` has no idle clients to count). */
export function isNodePostgresPool(client: object): client is NodePostgresPoolLike {
  return (
    hasFunction(client, 'connect') &&
    typeof (client as { idleCount?: unknown }).idleCount === 'number'
  );
}

/**
 * Whether `client` is one node-postgres connection: a `Client`, or a client checked out of
 * a `Pool`. It queries and is an event emitter; PGlite, which also has `query`, has
 * `listen` instead of events.
 */
export function isNodePostgresClient(client: object): client is NodePostgresClientLike {
  return (
    hasFunction(client, 'query') &&
    hasFunction(client, 'on') &&
    hasFunction(client, 'removeListener') &&
    !hasFunction(client, 'listen') &&
    !isNodePostgresPool(client)
  );
}

/** The pools whose checked-out clients get {@link ignoreCheckedOutError}, and those clients. */
const guarded = new WeakSet<object>();

/**
 * Hears the error of a checked-out client whose connection failed between two statements: the
 * client's next statement rejects with it ("Client has encountered a connection error and is
 * not queryable"), which is where it is handled.
 */
const ignoreCheckedOutError = () => {};

/**
 * The database idem runs transactions of its own on (transaction mode, consumers): refused
 * on one node-postgres `Client` (see {@link refuseOneNodePostgresConnection}); on a `Pool`,
 * every client it hands out gets a listener for its `error` event. A client checked out of a
 * pool has none (the pool listens only while it is idle), and node-postgres emits a
 * connection lost between two statements of a transaction (the handler awaiting something
 * else) as `error`: unheard, that is an uncaught exception, which ends the process.
 */
export function checkTransactionsOn(db: PgDatabaseLike, what: string): void {
  refuseOneNodePostgresConnection(db, what);
  hearCheckedOutErrors(db);
}

/**
 * On a node-postgres `Pool`, gives every client it hands out a listener for its `error`
 * event (see {@link checkTransactionsOn}); anything else is left as it is.
 */
export function hearCheckedOutErrors(db: PgDatabaseLike): void {
  const pool: unknown = (db as { $client?: unknown }).$client;
  if (typeof pool !== 'object' || pool === null || !isNodePostgresPool(pool)) return;
  if (guarded.has(pool)) return;
  guarded.add(pool);
  pool.on('acquire', (client) => {
    if (guarded.has(client)) return;
    guarded.add(client);
    client.on('error', ignoreCheckedOutError);
  });
}

/**
 * Refuses a database built on one node-postgres connection (`drizzle(client)` with a `pg`
 * `Client`) for `what`, which runs each call in a transaction of its own. Drizzle's
 * node-postgres session sends the BEGIN, the statements and the COMMIT or ROLLBACK of
 * concurrent transactions down that one connection, where they mix: Postgres sees a single
 * transaction, and one call's ROLLBACK undoes another call's writes after that call was told
 * they committed. A `Pool` gives each transaction a connection of its own.
 */
function refuseOneNodePostgresConnection(db: PgDatabaseLike, what: string): void {
  const client: unknown = (db as { $client?: unknown }).$client;
  if (typeof client !== 'object' || client === null || !isNodePostgresClient(client)) return;
  throw new ConfigurationError(
    `${what} runs each call in a transaction of its own, and this database is one ` +
      'node-postgres Client: the transactions of concurrent calls would share its one ' +
      "connection, where one call's ROLLBACK undoes another's committed writes. Build the " +
      'database on a pg Pool instead: drizzle(new Pool({ connectionString })).',
  );
}
