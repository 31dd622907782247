import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

/**
 * Any Drizzle Postgres database or transaction, whatever the driver (postgres-js,
 * PGlite, node-postgres, …) and whatever schema it was built with: idem only uses the
 * query builder and `execute`, which every driver shares.
 */
// biome-ignore lint/suspicious/noExplicitAny: the schema generics must accept any app's schema.
export type PgDatabaseLike = PgDatabase<PgQueryResultHKT, any, any>;

/** The transaction type of a Drizzle database: what `db.transaction(fn)` hands to `fn`. */
export type TransactionOf<TDb extends PgDatabaseLike> = Parameters<
  Parameters<TDb['transaction']>[0]
>[0];
