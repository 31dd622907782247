import { PGlite } from '@electric-sql/pglite';
import { type Logger, type SQL, sql } from 'drizzle-orm';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterAll, beforeAll } from 'vitest';
import { migrate } from '../src/postgres/migrate.js';
import type { PgDatabaseLike } from '../src/postgres/PgDatabaseLike.js';
import { executeRows } from '../src/postgres/rows.js';
import { createScratchDatabase } from '../src/testing/createScratchDatabase.js';
import { until } from './fixtures/deferred.js';

/** The real server the Postgres backend uses; each test file gets its own database there. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export const backends = ['PGlite', 'Postgres'] as const;
export type BackendName = (typeof backends)[number];

export interface TestDatabase {
  db: PgDatabaseLike;
  /** The database's connection string (Postgres only), for tests that open more clients. */
  url: string | undefined;
  /** Empties `idem_keys`. */
  truncate(): Promise<void>;
}

/**
 * Rows of a raw query: postgres-js returns an array, PGlite `{ rows }`.
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
 * The connection string of a Postgres test database, for a test that opens clients of its
 * own: PGlite has none, so such a test belongs under `backend === 'Postgres'`.
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

/**
 * The test database through a client that logs every statement to `logger`: a pool of two
 * connections of its own on Postgres (ended by `close`), the same PGlite instance otherwise.
 */
export function loggedDatabase(
  { db, url }: TestDatabase,
  logger: Logger,
): { db: PgDatabaseLike; close: () => Promise<void> } {
  if (url) {
    const client = postgres(url, { ...quiet, max: 2 });
    return { db: drizzlePostgres(client, { logger }), close: () => client.end() };
  }
  const { $client } = db as PgDatabaseLike & { $client: PGlite };
  return { db: drizzlePglite($client, { logger }), close: async () => {} };
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

async function openPglite() {
  const client = new PGlite();
  const db = drizzlePglite(client);
  await migrate(db);
  return { db, url: undefined, close: () => client.close() };
}

async function openPostgres() {
  const scratch = await createScratchDatabase();
  try {
    const db = connect(scratch.url);
    await migrate(db);
    return {
      db,
      url: scratch.url,
      close: async () => {
        await db.$client.end({ timeout: 5 });
        await scratch.drop();
      },
    };
  } catch (error) {
    await scratch.drop();
    throw error;
  }
}

/**
 * Gives the enclosing test file (or `describe`) a freshly migrated database of one
 * backend: PGlite in memory, or a database of its own on the real server, dropped in
 * `afterAll`. Call the returned function inside tests and hooks.
 */
export function useDatabase(backend: BackendName): () => TestDatabase {
  let opened:
    | { db: PgDatabaseLike; url: string | undefined; close: () => Promise<void> }
    | undefined;
  beforeAll(async () => {
    opened = backend === 'PGlite' ? await openPglite() : await openPostgres();
  });
  afterAll(async () => {
    await opened?.close();
    opened = undefined;
  });
  return () => {
    if (!opened) throw new Error(`the ${backend} test database is not open (used outside a test?)`);
    const { db, url } = opened;
    return {
      db,
      url,
      truncate: async () => {
        await db.execute(sql`truncate idem_keys`);
      },
    };
  };
}
