import type { SQL } from 'drizzle-orm';
import type { PgDatabaseLike } from '../../drizzle/PgDatabaseLike.js';

/** Rows of a raw statement: postgres-js returns an array, PGlite `{ rows }`. */
export async function executeRows<T>(db: PgDatabaseLike, query: SQL): Promise<T[]> {
  const result: unknown = await db.execute(query);
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}
