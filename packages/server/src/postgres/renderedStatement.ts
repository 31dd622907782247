import { Placeholder, type SQL, type SQLChunk, sql } from 'drizzle-orm';
import {
  type DirectStatement,
  directStatementOf,
  postgresJsClientOf,
  runDirect,
} from './directQuery.js';
import type { PgDatabaseLike } from './PgDatabaseLike.js';

/** A statement as Drizzle renders it: its text, `$n` for each parameter, and the parameters. */
interface Renderable {
  toSQL(): { sql: string; params: unknown[] };
}

/** A row as `selection` names and types it. */
type RowOf<TSelection extends Record<string, SQL.Aliased>> = {
  [K in keyof TSelection]: TSelection[K]['_']['type'];
};

/**
 * A data-modifying statement rendered once, to run as a named prepared query on whichever
 * database or transaction a call names, its placeholders bound per call.
 *
 * A Drizzle prepared query belongs to the session it was built on, so a statement run in a
 * fresh transaction on every request would otherwise be built anew on every request: the
 * query builder, then its SQL text from a tree of tables, columns and parameters. Here the
 * statement is rendered once by Drizzle itself (`toSQL()`) and kept as flat SQL (its text,
 * with the very parameters, placeholders and their column encoders, Drizzle rendered), the
 * body of a `WITH` whose rows a plain `SELECT` returns. Per call Drizzle only wraps that in
 * the select and prepares it under `name`: the driver sees one text and, for postgres-js,
 * prepares it once per connection, where `db.execute` would have Postgres parse and plan it
 * on every call. On postgres-js, with no logger of the app's, not even that: the query
 * Drizzle built the first time is sent as it is on each transaction's own connection.
 *
 * `selection` names the statement's `RETURNING` columns (`sql<T>\`column\``), as the rows
 * will carry them.
 */
export function renderedStatement<TSelection extends Record<string, SQL.Aliased>>(
  name: string,
  statement: Renderable,
  selection: TSelection,
) {
  const { sql: text, params } = statement.toSQL();
  // The text is Drizzle's rendering of one of this store's own statements (built in
  // prepareStatements from idem's table and literals), so its only `$n` are the markers of
  // its parameters, in order: the count below proves it for every statement.
  const pieces = text.split(/\$\d+\b/);
  if (pieces.length !== params.length + 1) {
    throw new Error(
      `renderedStatement ${name}: expected ${params.length} parameters in "${text}", found ${pieces.length - 1}`,
    );
  }
  // Text pieces and parameters side by side, through Drizzle's public `sql.raw` and
  // `sql.param` (a placeholder stays a placeholder): the flattest form for Drizzle to walk
  // on every call. Rendering the builder again on every call instead costs more CPU than
  // the rest of the statement's work in idem.
  const flat = sql.join(
    pieces.flatMap((piece, index) =>
      index < params.length ? [sql.raw(piece), chunkOf(params[index])] : [sql.raw(piece)],
    ),
  );
  const prepare = (db: PgDatabaseLike) => {
    // Typed loosely for `from()`, whose check for an empty selection a generic defeats.
    const body = db.$with(name, selection as Record<string, SQL.Aliased>).as(flat);
    return db.with(body).select().from(body).prepare(name);
  };
  // On postgres-js the query is built once, on the first database it runs on, and sent as
  // it is on every later transaction's connection (`runDirect`).
  let direct: DirectStatement | undefined | null;
  return {
    /** Runs the statement on `db` (a database or a transaction) with `values` bound. */
    async execute(
      db: PgDatabaseLike,
      values: Record<string, unknown>,
    ): Promise<RowOf<TSelection>[]> {
      const client = direct === null ? undefined : postgresJsClientOf(db);
      if (client) {
        direct ??= directStatementOf(prepare(db)) ?? null;
        if (direct) return (await runDirect(direct, client, values)) as RowOf<TSelection>[];
      }
      return (await prepare(db).execute(values)) as RowOf<TSelection>[];
    },
  };
}

/** A rendered parameter as a chunk of `sql.join`: a placeholder as it is, a value bound. */
function chunkOf(param: unknown): SQLChunk {
  return param instanceof Placeholder ? param : sql.param(param);
}
