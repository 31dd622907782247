import { Placeholder, type SQL, type SQLChunk, sql } from 'drizzle-orm';
import { causeChain } from './connectionError.js';
import {
  type DirectStatement,
  directStatementOf,
  postgresJsClientOf,
  sendDirect,
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
 * will carry them. With `rowRequired`, a run that returns no row fails instead, raised by
 * Postgres within the statement (see `rowsOrRaise`), so the transaction cannot commit
 * without it.
 */
export function renderedStatement<TSelection extends Record<string, SQL.Aliased>>(
  name: string,
  statement: Renderable,
  selection: TSelection,
  options: { rowRequired?: boolean } = {},
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
    if (!options.rowRequired) return db.with(body).select().from(body).prepare(name);
    return db
      .with(body)
      .select(selection as Record<string, SQL.Aliased>)
      .from(rowsOrRaise(name, Object.keys(selection).length))
      .prepare(name);
  };
  // On postgres-js the query is built once, on the first database it runs on, and sent as
  // it is on every later transaction's connection (`sendDirect`).
  let direct: DirectStatement | undefined | null;
  /**
   * Sends the statement on `db` now, where it goes straight to postgres-js (`sendDirect`:
   * handed to the connection before this returns, so ahead of anything sent after it);
   * undefined elsewhere, where Drizzle sends it when it gets to it.
   */
  const send = (
    db: PgDatabaseLike,
    values: Record<string, unknown>,
  ): Promise<RowOf<TSelection>[]> | undefined => {
    const client = direct === null ? undefined : postgresJsClientOf(db);
    if (!client) return undefined;
    direct ??= directStatementOf(prepare(db)) ?? null;
    if (!direct) return undefined;
    return sendDirect(direct, client, values) as Promise<RowOf<TSelection>[]>;
  };
  return {
    send,
    /** Runs the statement on `db` (a database or a transaction) with `values` bound. */
    async execute(
      db: PgDatabaseLike,
      values: Record<string, unknown>,
    ): Promise<RowOf<TSelection>[]> {
      const sent = send(db, values);
      if (sent) return sent;
      return (await prepare(db).execute(values)) as RowOf<TSelection>[];
    },
  };
}

/** What the error a `rowRequired` statement raises for no row says (see {@link noRowRaised}). */
const NO_ROW = 'idem: a statement that must change its key found no row';

/**
 * The rows of the CTE `name`, or, when it has none, an error raised by Postgres itself
 * (`22P02`, its message naming {@link NO_ROW}), which aborts the transaction the statement
 * runs in: a COMMIT sent behind it (pipelined, before its answer came) then rolls back.
 * `CASE` keeps the raising cast from being evaluated while a row exists, and
 * `pg_backend_pid()` (not an immutable function) keeps the planner from folding it into a
 * constant it would evaluate when planning.
 */
function rowsOrRaise(name: string, columns: number) {
  const cte = sql.identifier(name);
  const nulls = sql.join(
    Array.from({ length: columns }, () => sql`null`),
    sql`, `,
  );
  return sql`(select * from ${cte} union all select ${nulls} where case when exists (select from ${cte}) then false else (${sql.raw(`'${NO_ROW} ('`)} || pg_backend_pid() || ')')::int = 0 end) as ${sql.identifier(`${name}_rows`)}`;
}

/** Whether `error` (or a cause of it) is what a `rowRequired` statement raises for no row. */
export function noRowRaised(error: unknown): boolean {
  for (const link of causeChain(error)) {
    if (link.code === '22P02' && String(link.message).includes(NO_ROW)) return true;
  }
  return false;
}

/** A rendered parameter as a chunk of `sql.join`: a placeholder as it is, a value bound. */
function chunkOf(param: unknown): SQLChunk {
  return param instanceof Placeholder ? param : sql.param(param);
}
