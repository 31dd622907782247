import { randomBytes } from 'node:crypto';

export interface ScratchDatabase {
  /** The database's name, `<prefix>_<12 hex digits>`. */
  name: string;
  /** Its connection string: the server's URL with this database. */
  url: string;
  /**
   * Drops it. Connections still closing are given up to a second to leave; whatever is still
   * open then is ended (`WITH (FORCE)`).
   */
  drop(): Promise<void>;
}

export interface ScratchDatabaseOptions {
  /**
   * Any database on the server to create it on; only its server and credentials are used.
   * @default process.env.DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test
   */
  serverUrl?: string;
  /**
   * The start of its name, so leftovers tell which suite made them.
   * @default 'idem_test'
   */
  prefix?: string;
}

/** postgres-js logs NOTICEs (a drop of what is not there) by default. */
const quiet = { onnotice: () => {} };

/**
 * How long a drop waits for the database's connections to close by themselves. A pool's
 * `end()` can resolve before its last backend has gone; ended by the drop instead, that
 * backend sends its client FATAL 57P01 ("terminating connection due to administrator
 * command"), which the app's pool then reports as an error.
 */
const DROP_GRACE_MS = 1_000;
const DROP_POLL_MS = 10;

/**
 * Creates an empty, uniquely named database for one test file, benchmark or example, on a
 * real Postgres server, and hands back its URL and a `drop()`. Postgres 13 or later (the
 * drop ends leftover connections).
 *
 * @example
 * const scratch = await createScratchDatabase({ prefix: 'my_suite' });
 * const db = drizzle(postgres(scratch.url));
 * // … after the tests, once the clients are closed:
 * await scratch.drop();
 */
export async function createScratchDatabase(
  options: ScratchDatabaseOptions = {},
): Promise<ScratchDatabase> {
  const serverUrl =
    options.serverUrl ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const prefix = options.prefix ?? 'idem_test';
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) {
    throw new TypeError(
      `createScratchDatabase: prefix must be 1–41 lowercase letters, digits or underscores, starting with a letter or underscore; got ${JSON.stringify(prefix)}.`,
    );
  }
  // postgres-js is an optional peer: loaded here, not at the top, so the entry's other
  // helpers (serveFetch, startNatsCluster) load in an app that does not install it.
  const { default: postgres } = await import('postgres');
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = async (work: (sql: ReturnType<typeof postgres>) => Promise<unknown>) => {
    const sql = postgres(serverUrl, { ...quiet, max: 1, connect_timeout: 10 });
    try {
      await work(sql);
    } finally {
      await sql.end({ timeout: 5 });
    }
  };
  await admin((sql) => sql.unsafe(`create database "${name}"`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () =>
      admin(async (sql) => {
        const deadline = performance.now() + DROP_GRACE_MS;
        while (performance.now() < deadline) {
          const [open] = await sql<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity where datname = ${name}`;
          if (open?.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, DROP_POLL_MS));
        }
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
      }),
  };
}
