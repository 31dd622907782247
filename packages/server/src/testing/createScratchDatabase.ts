import { randomBytes } from 'node:crypto';

export interface ScratchDatabase {
  /** The database's name, `<prefix>_<12 hex digits>`. */
  name: string;
  /** Its connection string: the server's URL with this database. */
  url: string;
  /** Drops it, ending whatever connections are still open on it (`WITH (FORCE)`). */
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
  const admin = async (statement: string) => {
    const sql = postgres(serverUrl, { ...quiet, max: 1, connect_timeout: 10 });
    try {
      await sql.unsafe(statement);
    } finally {
      await sql.end({ timeout: 5 });
    }
  };
  await admin(`create database "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => admin(`drop database if exists "${name}" with (force)`),
  };
}
