import type { SQL } from 'drizzle-orm';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/**
 * The rows of a raw statement's result: postgres-js returns an array, PGlite and
 * node-postgres `{ rows }`.
 */
export function rowsOf<T = Record<string, unknown>>(result: unknown): T[] {
  return (Array.isArray(result) ? result : (result as { rows: T[] }).rows) as T[];
}

/** Runs a raw statement and returns its rows, whatever the driver. */
export async function executeRows<T = Record<string, unknown>>(
  db: PgDatabaseLike,
  query: SQL,
): Promise<T[]> {
  return rowsOf<T>(await db.execute(query));
}
