import * as drizzle from 'drizzle-orm';
import {
  Column,
  DrizzleQueryError,
  entityKind,
  fillPlaceholders,
  is,
  NoopLogger,
  SQL,
} from 'drizzle-orm';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/**
 * Drizzle's row mapper, exported at run time but not by its declarations; a Drizzle without
 * it runs every statement itself.
 */
const mapResultRow = (drizzle as unknown as { mapResultRow?: MapResultRow }).mapResultRow;
type MapResultRow = (
  fields: unknown,
  row: unknown[],
  joinsNotNullableMap: Record<string, boolean> | undefined,
) => unknown;

/** A postgres-js `Sql` (a pool, a reserved connection or a transaction) as idem sends on it. */
interface PostgresJsSql {
  unsafe(
    query: string,
    params: unknown[],
    options: { prepare: boolean },
  ): Promise<unknown[]> & { values(): Promise<unknown[][]> };
}

/** A statement that runs with its placeholders' values. */
interface Executable {
  execute(values?: Record<string, unknown>): Promise<unknown>;
}

/**
 * What Drizzle's postgres-js prepared query keeps of a statement (read at run time, not
 * declared by its types): its text, its parameters (placeholders among them), and how it
 * maps rows (`mapRow`; undefined for a statement whose rows are not mapped).
 */
export interface DirectStatement {
  readonly queryString: string;
  readonly params: unknown[];
  readonly prepare: boolean;
  readonly mapRow: ((row: unknown[]) => unknown) | undefined;
}

/** How a selected field turns the driver's value into the row's (a column, or SQL's decoder). */
interface Decoder {
  mapFromDriverValue(value: unknown): unknown;
}

/** A selected field as Drizzle orders them: where the value goes, and what it is. */
interface OrderedField {
  path: string[];
  field: unknown;
}

/** SQL's decoder: set at run time (`mapWith`), not declared by Drizzle's types. */
type Decoded = { decoder: Decoder };

/**
 * The decoder Drizzle's `mapResultRow` picks for `field`: a column, SQL, or aliased SQL (the
 * fields idem's statements select); undefined for anything else (a subquery, say).
 */
function decoderOf(field: unknown): Decoder | undefined {
  if (is(field, Column)) return field as unknown as Decoder;
  if (is(field, SQL)) return (field as unknown as Decoded).decoder;
  if (is(field, SQL.Aliased)) return (field.sql as unknown as Decoded).decoder;
  return undefined;
}

/**
 * Drizzle's `mapResultRow(fields, row, joinsNotNullableMap)` with what it works out per
 * row (each field's kind and decoder) worked out once. idem's statements select flat
 * fields (one name each, no joined tables; columns and SQL), which it maps the same way,
 * value by value; any other shape is left to `mapResultRow` itself.
 */
function rowMapperOf(
  fields: unknown,
  joinsNotNullableMap: Record<string, boolean> | undefined,
  mapResultRow: MapResultRow,
): (row: unknown[]) => unknown {
  const ordered = fields as OrderedField[];
  const decoders = ordered.map(({ field }) => decoderOf(field));
  const flat = ordered.every(({ path }) => Array.isArray(path) && path.length === 1);
  if (!flat || decoders.includes(undefined)) {
    return (row) => mapResultRow(fields, row, joinsNotNullableMap);
  }
  const names = ordered.map(({ path }) => path[0] as string);
  return (row) => {
    const mapped: Record<string, unknown> = {};
    for (let index = 0; index < names.length; index++) {
      const value = row[index];
      mapped[names[index] as string] =
        value === null ? null : (decoders[index] as Decoder).mapFromDriverValue(value);
    }
    return mapped;
  };
}

const kindOf = (value: unknown) =>
  (value as { constructor?: { [entityKind]?: unknown } } | undefined)?.constructor?.[entityKind];

const isPostgresJsSql = (client: unknown): client is PostgresJsSql =>
  typeof (client as Partial<PostgresJsSql> | undefined)?.unsafe === 'function';

/**
 * The statement of a Drizzle postgres-js prepared query, or undefined for another driver,
 * a query that maps its rows its own way, or a Drizzle that keeps them elsewhere.
 */
export function directStatementOf(prepared: unknown): DirectStatement | undefined {
  if (mapResultRow === undefined || kindOf(prepared) !== 'PostgresJsPreparedQuery') return;
  const query = prepared as Partial<DirectStatement> & {
    customResultMapper?: unknown;
    fields?: unknown;
    joinsNotNullableMap?: Record<string, boolean>;
  };
  const { queryString, params, fields, joinsNotNullableMap, prepare } = query;
  if (
    query.customResultMapper !== undefined ||
    typeof queryString !== 'string' ||
    !Array.isArray(params) ||
    typeof prepare !== 'boolean' ||
    (fields !== undefined && !Array.isArray(fields))
  ) {
    return;
  }
  const mapRow = fields ? rowMapperOf(fields, joinsNotNullableMap, mapResultRow) : undefined;
  return { queryString, params, prepare, mapRow };
}

/**
 * The postgres-js client of `db` (a Drizzle database or transaction) when idem may send its
 * statements on it directly: Drizzle's postgres-js session with no logger of the app's (with
 * one, Drizzle runs them, so the logger hears every statement).
 */
export function postgresJsClientOf(db: unknown): PostgresJsSql | undefined {
  const session = (db as { session?: { client?: unknown; logger?: unknown } }).session;
  if (kindOf(session) !== 'PostgresJsSession' || !is(session?.logger, NoopLogger)) return;
  const client = session?.client;
  return isPostgresJsSql(client) ? client : undefined;
}

/**
 * Sends `statement` on `client` with `values` bound, now: the query is handed to postgres-js
 * before this returns (postgres-js sends a query once it is awaited, so this awaits it here,
 * with `then`), and so goes out ahead of any statement sent after this call on the same
 * connection, a transaction's `COMMIT` included. Anything that fails before that (binding
 * the values) throws from this call. The promise has the rows, mapped as Drizzle maps them,
 * or a failure wrapped as Drizzle wraps it (`DrizzleQueryError`, the driver's error its
 * cause).
 */
export function sendDirect(
  statement: DirectStatement,
  client: PostgresJsSql,
  values: Record<string, unknown>,
): Promise<unknown[]> {
  const { queryString, prepare, mapRow } = statement;
  const bound = fillPlaceholders(statement.params, values);
  const query = client.unsafe(queryString, bound, { prepare });
  const failed = (error: unknown): never => {
    throw new DrizzleQueryError(queryString, bound, error as Error);
  };
  if (!mapRow) return query.then((rows) => rows, failed);
  return query.values().then((rows) => rows.map(mapRow), failed);
}

/**
 * `prepared` itself, or, where `db` is Drizzle's postgres-js driver with no logger of the
 * app's (`postgresJsClientOf`), the same statement sent straight to postgres-js: the same
 * text, the same parameters (`fillPlaceholders`), the same named prepared statement per
 * connection and the same row mapping (`mapResultRow`), without what Drizzle wraps around
 * every execution (three tracer frames, the query cache's checks, the logger), which costs
 * idem's hot path more CPU than the rest of its own work per statement. idem's statements
 * are writes and reads of the key that must never come from a cache anyway.
 */
export function directPrepared<T extends Executable>(
  prepared: T,
  db: PgDatabaseLike,
): Pick<T, 'execute'> {
  const client = postgresJsClientOf(db);
  const statement = client && directStatementOf(prepared);
  if (!client || !statement) return prepared;
  // A failure to bind the values rejects, as Drizzle's own `execute` does. Not an async
  // function: one returning the query's promise would wrap it in another, two microtasks
  // more per statement.
  const direct: Executable = {
    execute: (values = {}) => {
      try {
        return sendDirect(statement, client, values);
      } catch (error) {
        return Promise.reject(error);
      }
    },
  };
  return direct as Pick<T, 'execute'>;
}
