import { type SQL, sql } from 'drizzle-orm';
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
 * on every call.
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
  const pieces = text.split(/\$\d+\b/);
  if (pieces.length !== params.length + 1) {
    throw new Error(
      `renderedStatement ${name}: expected ${params.length} parameters in "${text}", found ${pieces.length - 1}`,
    );
  }
  // One SQL of text pieces and parameters side by side, as the `sql` tag builds it: the
  // flattest form for Drizzle to walk on every call.
  const strings = Object.assign(pieces, { raw: pieces }) as unknown as TemplateStringsArray;
  const flat = sql(strings, ...params);
  return {
    /** Runs the statement on `db` (a database or a transaction) with `values` bound. */
    async execute(
      db: PgDatabaseLike,
      values: Record<string, unknown>,
    ): Promise<RowOf<TSelection>[]> {
      // Typed loosely for `from()`, whose check for an empty selection a generic defeats.
      const body = db.$with(name, selection as Record<string, SQL.Aliased>).as(flat);
      const rows = await db.with(body).select().from(body).prepare(name).execute(values);
      return rows as RowOf<TSelection>[];
    },
  };
}
