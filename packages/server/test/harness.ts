import { PGlite } from '@electric-sql/pglite';
import { type Logger, type SQL, sql } from 'drizzle-orm';
import { drizzle as drizzleNodePostgres, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll } from 'vitest';
import { migrate } from '../src/postgres/migrate.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { executeRows } from '../src/postgres/rows.js';
import { createScratchDatabase } from '../src/testing/createScratchDatabase.js';
import { until } from './fixtures/deferred.js';

/** The real server the Postgres backend uses; each test file gets its own database there. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * The backends most suites run on: embedded PGlite, and the real server through postgres-js
 * (`Postgres`).
 */
export const backends = ['PGlite', 'Postgres'] as const;

/**
 * Every driver the README names, for the suites that prove a driver works (the store
 * contract, the HTTP contract, statement counts, the outbox): `backends` plus the real
 * server through node-postgres (a `pg` Pool under `drizzle-orm/node-postgres`).
 */
export const driverBackends = [...backends, 'node-postgres'] as const;
export type BackendName = (typeof driverBackends)[number];

export interface TestDatabase {
  backend: BackendName;
  db: PgDatabaseLike;
  /** The database's connection string (Postgres only), for tests that open more clients. */
  url: string | undefined;
  /** Empties `idem_keys`. */
  truncate(): Promise<void>;
}

/**
 * Rows of a raw query: postgres-js returns an array, PGlite and node-postgres `{ rows }`.
 */
export const rows = executeRows;

/**
 * The one row a statement answers (a count, a setting): a statement that answers none is
 * an error saying so, not an `undefined` to read a field of.
 */
export async function oneRow<T>(db: PgDatabaseLike, query: SQL): Promise<T> {
  const [row] = await rows<T>(db, query);
  if (row === undefined) throw new Error('the statement answered no row');
  return row;
}

/** The `n` of a `select count(*)::int as n …`. */
export async function countOf(db: PgDatabaseLike, query: SQL): Promise<number> {
  return (await oneRow<{ n: number }>(db, query)).n;
}

/** Counts `idem_keys` rows holding `key`, in any scope. */
export const countKeys = (db: PgDatabaseLike, key: string): Promise<number> =>
  countOf(db, sql`select count(*)::int as n from idem_keys where key = ${key}`);

/** A value the test has already found (a response, a row): its absence is an error naming it. */
export function defined<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`expected ${what}, found none`);
  return value;
}

/**
 * The connection string of a test database on the real server, for a test that opens
 * clients of its own: PGlite has none, so such a test belongs under a backend on the server
 * (`Postgres` or `node-postgres`).
 */
export function postgresUrl(url: string | undefined): string {
  if (url === undefined) throw new Error('a PGlite database has no connection string');
  return url;
}

/**
 * A logged statement's text on one line, for tests that name statements by their start. A
 * statement transaction mode runs inside its own `WITH "idem_tx_…"` reads as the statement
 * it wraps.
 */
export function statementText(query: string): string {
  return query
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^with "idem_tx_\w+" as \(/, '');
}

/** postgres-js logs NOTICEs by default; tests want quiet output. */
const quiet = { onnotice: () => {} };

/** Opens a client on one database; `max` connections (default 10). */
export function connect(url: string, max = 10): PostgresJsDatabase & { $client: postgres.Sql } {
  return drizzlePostgres(postgres(url, { ...quiet, max }));
}

/** Opens a node-postgres `Pool` of `max` connections (default 10) on one database. */
export function connectNodePostgres(
  url: string,
  max = 10,
  logger?: Logger,
): NodePgDatabase & { $client: pg.Pool } {
  const pool = new pg.Pool({ connectionString: url, max });
  // An idle pooled client whose connection fails emits `error` on the pool: unheard, that
  // is an uncaught exception. The next checkout opens a new connection.
  pool.on('error', () => {});
  return drizzleNodePostgres(pool, logger ? { logger } : {});
}

/** A database and how to close the client it opened. */
export interface OpenedClient {
  db: PgDatabaseLike;
  close: () => Promise<void>;
}

/**
 * Another client of the test database, through the same driver as its backend (`max`
 * connections of its own, closed by `close`), and `logger` hearing every statement; on
 * PGlite, the same instance, whose `close` does nothing.
 */
export function anotherClient(
  { backend, db, url }: TestDatabase,
  { max = 10, logger }: { max?: number; logger?: Logger } = {},
): OpenedClient {
  if (backend === 'PGlite' || !url) {
    const { $client } = db as PgDatabaseLike & { $client: PGlite };
    return { db: drizzlePglite($client, logger ? { logger } : {}), close: async () => {} };
  }
  if (backend === 'node-postgres') {
    const opened = connectNodePostgres(url, max, logger);
    return { db: opened, close: () => opened.$client.end() };
  }
  const client = postgres(url, { ...quiet, max });
  return { db: drizzlePostgres(client, logger ? { logger } : {}), close: () => client.end() };
}

/**
 * The test database through a client that logs every statement to `logger`: a pool of two
 * connections of its own on a real server (ended by `close`), the same PGlite instance
 * otherwise.
 */
export function loggedDatabase(database: TestDatabase, logger: Logger): OpenedClient {
  return anotherClient(database, { max: 2, logger });
}

/**
 * One transaction's statements as a `loggedDatabase`'s logger sees them: Drizzle's
 * node-postgres session sends BEGIN and COMMIT as statements of its own and logs them
 * (`begin`, `commit`); postgres-js and PGlite send them inside their driver's transaction
 * call, which the logger does not see.
 */
export function loggedTransaction(backend: BackendName, statements: string[]): string[] {
  return backend === 'node-postgres' ? ['begin', ...statements, 'commit'] : statements;
}

/**
 * Waits until the number of this database's backends waiting on a lock (`pg_stat_activity`)
 * satisfies `enough`: duplicates queued on a key's lock, not luck, are what keeps them out.
 */
export async function untilLockWaiters(
  url: string,
  enough: (waiting: number) => boolean,
  { what = 'backends to wait on a lock', timeoutMs = 60_000 } = {},
): Promise<void> {
  const observer = connect(url, 1);
  try {
    await until(
      async () =>
        enough(
          await countOf(
            observer,
            sql`select count(*)::int as n from pg_stat_activity
                where datname = current_database() and wait_event_type = 'Lock'`,
          ),
        ),
      { what, timeoutMs },
    );
  } finally {
    await observer.$client.end();
  }
}

/**
 * Waits until a backend of this database waits on the advisory lock `gate` (one bigint:
 * `classid` 0, `objid` the gate, `objsubid` 1 in `pg_locks`), and answers its pid.
 */
export function untilGateWaiter(
  observer: PgDatabaseLike,
  gate: number,
  what: string,
): Promise<number> {
  return until(
    async () =>
      (
        await rows<{ pid: number }>(
          observer,
          sql`select pid from pg_locks
              where locktype = 'advisory' and not granted
                and database = (select oid from pg_database where datname = current_database())
                and classid = 0 and objid = ${gate} and objsubid = 1`,
        )
      )[0]?.pid,
    { what, timeoutMs: 60_000 },
  );
}

export {
  createScratchDatabase,
  type ScratchDatabase,
} from '../src/testing/createScratchDatabase.js';

interface OpenedDatabase {
  db: PgDatabaseLike;
  url: string | undefined;
  close: () => Promise<void>;
}

async function openPglite(): Promise<OpenedDatabase> {
  const client = new PGlite();
  const db = drizzlePglite(client);
  await migrate(db);
  return { db, url: undefined, close: () => client.close() };
}

/** A scratch database on the real server, through postgres-js or a node-postgres Pool. */
async function openServer(driver: 'Postgres' | 'node-postgres'): Promise<OpenedDatabase> {
  const scratch = await createScratchDatabase();
  try {
    const { db, end } =
      driver === 'Postgres' ? openPostgresJs(scratch.url) : openNodePostgres(scratch.url);
    try {
      await migrate(db);
    } catch (error) {
      await end();
      throw error;
    }
    return {
      db,
      url: scratch.url,
      // Dropped even when the pool cannot end (a failed test that left a client checked
      // out makes a node-postgres Pool's end() wait for it): the drop ends what is left.
      close: async () => {
        try {
          await endWithin(end, END_GRACE_MS);
        } finally {
          await scratch.drop();
        }
      },
    };
  } catch (error) {
    await scratch.drop();
    throw error;
  }
}

/** How long a test database's pool gets to end before its database is dropped anyway. */
const END_GRACE_MS = 3_000;

/** `end()`, given up after `ms` (its connections are then ended by the drop). */
async function endWithin(end: () => Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([end(), late]);
  } finally {
    clearTimeout(timer);
  }
}

function openPostgresJs(url: string) {
  const db = connect(url);
  return { db, end: () => db.$client.end({ timeout: 5 }) };
}

function openNodePostgres(url: string) {
  const db = connectNodePostgres(url);
  return { db, end: () => db.$client.end() };
}

/**
 * Gives the enclosing test file (or `describe`) a freshly migrated database of one
 * backend: PGlite in memory, or a database of its own on the real server (through
 * postgres-js or a node-postgres Pool, ended in `afterAll`), dropped in `afterAll`. Call the returned function inside tests and hooks.
 */
export function useDatabase(backend: BackendName): () => TestDatabase {
  let opened: OpenedDatabase | undefined;
  beforeAll(async () => {
    opened = backend === 'PGlite' ? await openPglite() : await openServer(backend);
  });
  afterAll(async () => {
    await opened?.close();
    opened = undefined;
  });
  return () => {
    if (!opened) throw new Error(`the ${backend} test database is not open (used outside a test?)`);
    const { db, url } = opened;
    return {
      backend,
      db,
      url,
      truncate: async () => {
        await db.execute(sql`truncate idem_keys`);
      },
    };
  };
}
