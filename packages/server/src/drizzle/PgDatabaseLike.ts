import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

/**
 * Any Drizzle Postgres database or transaction, whatever the driver (postgres-js,
 * PGlite, node-postgres, …) and whatever schema it was built with: idem only uses the
 * query builder and `execute`, which every driver shares.
 */
// biome-ignore lint/suspicious/noExplicitAny: the schema generics must accept any app's schema.
export type PgDatabaseLike = PgDatabase<PgQueryResultHKT, any, any>;
