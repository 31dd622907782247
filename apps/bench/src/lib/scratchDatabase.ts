import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { onCleanup } from './cleanup.js';
import { ADMIN_DATABASE_URL, quiet } from './config.js';

export interface ScratchDatabase {
  name: string;
  url: string;
  /** Drops the database (ending its connections); also runs on failure and Ctrl-C. */
  drop(): Promise<void>;
}

/** A uniquely named, empty database on the server at `ADMIN_DATABASE_URL`. */
export async function createScratchDatabase(prefix = 'idem_bench'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await withAdmin((sql) => sql.unsafe(`create database "${name}"`));
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  const drop = onCleanup(`drop database ${name}`, async () => {
    // WITH (FORCE) ends whatever connection a killed child left behind.
    await withAdmin((sql) => sql.unsafe(`drop database if exists "${name}" with (force)`));
  });
  return { name, url: url.toString(), drop };
}

async function withAdmin<T>(run: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(ADMIN_DATABASE_URL, { ...quiet, max: 1, connect_timeout: 10 });
  try {
    return await run(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
