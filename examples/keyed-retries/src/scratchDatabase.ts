import {
  createScratchDatabase as createDatabase,
  type ScratchDatabase,
} from '@idem/server/testing';

/** The Postgres server to use; the example creates (and drops) a database of its own there. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type { ScratchDatabase };

/** postgres-js logs NOTICEs by default; the example wants quiet output. */
export const quiet = { onnotice: () => {} };

/** Creates an empty database named `idem_keyed_retries_<random>` on `serverUrl`. */
export function createScratchDatabase(serverUrl = DATABASE_URL): Promise<ScratchDatabase> {
  return createDatabase({ serverUrl, prefix: 'idem_keyed_retries' });
}
