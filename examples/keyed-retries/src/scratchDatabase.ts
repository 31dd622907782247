import { randomUUID } from 'node:crypto';
import postgres from 'postgres';

/** The Postgres server to use; the example creates (and drops) a database of its own there. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface ScratchDatabase {
  /** The new database's connection string. */
  url: string;
  /** Drops the database; end your own clients first (a leftover connection is ended too). */
  drop(): Promise<void>;
}

/** postgres-js logs NOTICEs by default; the example wants quiet output. */
export const quiet = { onnotice: () => {} };

/** Creates an empty database named `idem_keyed_retries_<random>` on `serverUrl`. */
export async function createScratchDatabase(serverUrl = DATABASE_URL): Promise<ScratchDatabase> {
  const name = `idem_keyed_retries_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const admin = postgres(serverUrl, { ...quiet, max: 1 });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const dropper = postgres(serverUrl, { ...quiet, max: 1 });
      try {
        // WITH (FORCE) (Postgres 13+) ends a connection a failed run may have left open.
        await dropper.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await dropper.end();
      }
    },
  };
}
