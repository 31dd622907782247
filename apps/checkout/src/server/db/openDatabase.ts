import path from 'node:path';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { lockDataDir } from './dataDirLock';

/** The shop's database, whichever driver is behind it (PGlite or postgres-js). */
export type AppDatabase = PgDatabase<PgQueryResultHKT>;

export interface OpenDatabase {
  db: AppDatabase;
  /** For the start-up banner: where the data lives. */
  description: string;
  /** True on PGlite: one connection, so nothing may use `db` while a transaction is open. */
  embedded: boolean;
  close(): Promise<void>;
}

/** Where the embedded database lives unless DEMO_DATA_DIR says otherwise. */
export function defaultDataDir(): string {
  return path.join(/*turbopackIgnore: true*/ process.cwd(), '.data', 'pglite');
}

/**
 * `DATABASE_URL` set: Postgres through postgres-js (any number of app servers may share it).
 * Otherwise: embedded PGlite in `DEMO_DATA_DIR` (default `.data/pglite` under the app),
 * locked to this process.
 */
export async function openDatabase(): Promise<OpenDatabase> {
  const url = process.env.DATABASE_URL;
  if (url) {
    const [{ default: postgres }, { drizzle }] = await Promise.all([
      import('postgres'),
      import('drizzle-orm/postgres-js'),
    ]);
    // Notices ("relation already exists, skipping") are start-up noise, not news. No
    // array-type query on each new connection: postgres.js 3.4.9 leaves its failure (a
    // backend killed while the connection opens) unhandled, which ends the process.
    const client = postgres(url, { max: 10, onnotice: () => {}, fetch_types: false });
    return {
      db: drizzle(client),
      description: `Postgres at ${redact(url)}`,
      embedded: false,
      close: () => client.end({ timeout: 5 }),
    };
  }

  const dataDir = path.resolve(
    /*turbopackIgnore: true*/ process.env.DEMO_DATA_DIR ?? defaultDataDir(),
  );
  const release = lockDataDir(dataDir);
  try {
    const [{ PGlite }, { drizzle }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('drizzle-orm/pglite'),
    ]);
    const client = await PGlite.create(dataDir);
    return {
      db: drizzle(client),
      description: `embedded PGlite in ${path.relative(process.cwd(), dataDir) || dataDir}`,
      embedded: true,
      async close() {
        try {
          await client.close();
        } finally {
          release();
        }
      },
    };
  } catch (error) {
    release();
    throw error;
  }
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'DATABASE_URL';
  }
}
