import { gathered } from './gathered.js';
import type { prepareStatements } from './prepareStatements.js';
import type { claimValues, completionValues } from './storeClaim.js';

type Statements = ReturnType<typeof prepareStatements>;
type RowsOf<S extends () => { execute(values: never): Promise<unknown[]> }> = Awaited<
  ReturnType<ReturnType<S>['execute']>
>;

/** A key's row as the store's reads return it: its columns and the statement's "now". */
export type ReadRow = RowsOf<Statements['read']>[number];

/** Binds a statement's values: the injected clock's "now" added, when the store has one. */
type Bind = <T extends object>(values: T) => T & { now?: string };

/** A claim's values, bound (see `claimValues`). */
type NewKey = ReturnType<typeof claimValues> & { now?: string };
/** A completion's values, bound (see `completionValues`). */
type Completion = ReturnType<typeof completionValues> & { now?: string };

/**
 * How a store sends the statements every call makes: a read of a key, a new key's
 * `INSERT`, a completion. A store on a database gathers each kind (`gatheredStatements`);
 * a transaction's store sends each alone, between the transaction's own statements.
 */
export interface StoreSends {
  /** Reads a key's row (undefined where it has none). */
  read(scope: string, key: string): Promise<ReadRow | undefined>;
  /** Inserts a new key: the statement's "now" where it was inserted, else undefined. */
  insertNew(values: NewKey): Promise<number | undefined>;
  /** Completes a key: a row where the incarnation `values` names held it, none where not. */
  complete(values: Completion): Promise<unknown[]>;
}

/** Each kind's statement alone, with values already bound. */
function aloneOn(statements: Statements) {
  return {
    read: (values: { scope: string; key: string; now?: string }) =>
      statements
        .read()
        .execute(values)
        .then((rows): ReadRow | undefined => rows[0]),
    insertNew: (values: NewKey) =>
      statements
        .insertNew()
        .execute(values)
        .then(([row]) => (row ? Number(row.nowMs) : undefined)),
    complete: (values: Completion): Promise<unknown[]> => statements.complete().execute(values),
  };
}

/** Each statement alone, as a transaction's store sends them. */
export function singleStatements(statements: Statements, bind: Bind): StoreSends {
  const alone = aloneOn(statements);
  return { ...alone, read: (scope, key) => alone.read(bind({ scope, key })) };
}

/** One array per field named, of that field of every call, in order (a statement's values). */
function arraysOf<T, Names extends string>(
  calls: readonly T[],
  fields: Record<Names, keyof T>,
): Record<Names, unknown[]> {
  const arrays = {} as Record<Names, unknown[]>;
  for (const name in fields) arrays[name] = calls.map((call) => call[fields[name]]);
  return arrays;
}

/** A text Postgres may not give back as sent (a lone surrogate becomes U+FFFD). */
const MAY_CHANGE = /[\uD800-\uDFFF]/;

/** The longest outcome (its JSON, in characters) a completion sends with others. */
const GATHERED_OUTCOME = 16_384;

/** One key's identity as text, for keys matched by name in a statement's reply. */
const idOf = (scope: string, key: string) => `${scope.length}:${scope}\u0000${key}`;

/**
 * The statements every call makes, each kind gathered (`gathered`): reads, new keys'
 * `INSERT`s and completions asked for during one turn of the event loop go out as one
 * statement per kind, where there are several.
 *
 * Each call gets the answer a statement of its own would have given at that moment:
 * - a read writes nothing and takes no lock: the rows are those the keys had;
 * - the `INSERT` of several new keys inserts each that has no row (`ON CONFLICT DO
 *   NOTHING`), as one statement each would; only the `INSERT` waits for another
 *   transaction (one that inserted the same key and has not committed), and nothing waits
 *   for it, so it is never part of a deadlock. A key asked for twice in one statement is
 *   inserted for its first call; the other finds it, as one statement later would. A key
 *   whose text Postgres may not give back as sent (a lone surrogate) goes alone, as keys are
 *   matched by name;
 * - the completion of several keys fences each by its own incarnation, as `complete` does;
 *   an outcome longer than `GATHERED_OUTCOME` characters goes alone, which bounds the
 *   statement's size.
 *
 * Only calls that bind one "now" go together (the database's clock binds none; an injected
 * clock binds its own). A statement of several that fails: see `refusedForACall` (a value
 * the server refuses sends each call again alone; any other failure fails them all, as it
 * would have failed each: a completion whose connection was lost is then sent again by
 * `retryLostConnection`, fenced, which asks whether it had landed).
 */
export function gatheredStatements(statements: Statements, bind: Bind): StoreSends {
  const alone = aloneOn(statements);
  const read = gathered<{ scope: string; key: string; now?: string }, ReadRow | undefined>({
    alone: alone.read,
    async together(calls) {
      const rows = await statements.readMany().execute({
        ...arraysOf(calls, { scopes: 'scope', keys: 'key' }),
        now: calls[0]?.now,
      });
      const answers: (ReadRow | undefined)[] = new Array(calls.length);
      for (const row of rows) answers[row.place - 1] = row;
      return answers;
    },
    group: byNow,
  });
  const insert = gathered<NewKey, number | undefined>({
    alone: alone.insertNew,
    async together(calls) {
      const sorted = [...calls].sort(byKey);
      const rows = await statements.insertMany().execute({
        ...arraysOf(sorted, {
          scopes: 'scope',
          keys: 'key',
          fingerprints: 'fingerprint',
          leasesMs: 'leaseMs',
          ttlsMs: 'ttlMs',
        }),
        now: calls[0]?.now,
      });
      const inserted = new Map<string, number>();
      for (const row of rows) inserted.set(idOf(row.scope, row.key), Number(row.nowMs));
      // The first call of a key inserted it; any other call of that key found it.
      return calls.map((call) => {
        const id = idOf(call.scope, call.key);
        const nowMs = inserted.get(id);
        inserted.delete(id);
        return nowMs;
      });
    },
    group: byNow,
    mayGather: (values) =>
      values.lockWait === undefined &&
      !MAY_CHANGE.test(values.scope) &&
      !MAY_CHANGE.test(values.key),
  });
  const complete = gathered<Completion, unknown[]>({
    alone: alone.complete,
    mayGather: (values) => values.outcome.length <= GATHERED_OUTCOME,
    async together(calls) {
      const sorted = [...calls].sort(byKey);
      const rows = await statements.completeMany().execute({
        ...arraysOf(sorted, {
          scopes: 'scope',
          keys: 'key',
          versions: 'version',
          createdAts: 'createdAt',
          outcomes: 'outcome',
          ttlsMs: 'ttlMs',
        }),
        now: calls[0]?.now,
      });
      const answers = new Map<Completion, unknown[]>();
      for (const row of rows) answers.set(sorted[row.place - 1] as Completion, [row]);
      return calls.map((call) => answers.get(call) ?? []);
    },
    group: byNow,
  });
  return {
    read: (scope, key) => read(bind({ scope, key })),
    insertNew: insert,
    complete,
  };
}

/** Calls that bind one "now" may share a statement. */
const byNow = (values: { now?: string }) => values.now;

/** Orders calls by key (scope, then key): the rows of one statement go in in that order. */
const byKey = (a: { scope: string; key: string }, b: { scope: string; key: string }) =>
  a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
