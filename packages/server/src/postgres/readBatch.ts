import type { prepareStatements } from './prepareStatements.js';

type Statements = ReturnType<typeof prepareStatements>;

/** A key's row as the store's reads return it: its columns and the statement's "now". */
export type ReadRow = Awaited<ReturnType<ReturnType<Statements['read']>['execute']>>[number];

/** Binds a statement's values: the injected clock's "now" added, when the store has one. */
type Bind = <T extends object>(values: T) => T & { now?: string };

/** Reads one key's row (undefined where it has none). */
export type ReadKey = (scope: string, key: string) => Promise<ReadRow | undefined>;

/** The most keys one statement reads: a bound on its arrays and on its reply. */
const MOST_KEYS = 256;

/** A read asked for, with the values it binds (the injected clock's "now" among them). */
interface Waiting {
  values: { scope: string; key: string; now?: string };
  resolve(row: ReadRow | undefined): void;
  reject(error: unknown): void;
}

/** The end of this turn of the event loop, once the I/O it found ready has been handled. */
const atEndOfTurn: (run: () => void) => void =
  typeof setImmediate === 'function' ? (run) => setImmediate(run) : (run) => setTimeout(run, 0);

/** One key's read at a time: the store's `read` statement (a transaction's store). */
export function singleReads(statements: Statements, bind: Bind): ReadKey {
  return (scope, key) =>
    statements
      .read()
      .execute(bind({ scope, key }))
      .then((rows) => rows[0]);
}

/**
 * Reads of keys, gathered: the reads asked for during one turn of the event loop are sent at
 * its end (`setImmediate`), a read alone as the store's `read` statement, several as one
 * `read_many` statement that finds each key by the primary key. Under load (a burst of
 * retries, or transaction mode's read before every call's transaction) a database then runs
 * one statement for many calls, on one connection, where it ran one per call on as many;
 * a read asked for alone waits only for the rest of the turn it was asked in.
 *
 * Each answer is the row the key had when its statement ran, as a read of its own would
 * give: a read writes nothing and takes no lock, so reads that run together answer exactly
 * what they would answer one after another at that moment, with one statement "now" (the
 * database's clock; with an injected clock, only reads that bind the same "now" go
 * together). A statement of several that fails (a value Postgres refuses, a connection lost
 * under it) fails none of them: each is sent again alone, so the failure stays with the
 * read it belongs to and a lost connection costs a second try on another.
 *
 * For a store on a database only: a transaction's store reads on that transaction's one
 * connection, where a read must run between its own statements.
 */
export function batchedReads(statements: Statements, bind: Bind): ReadKey {
  const readAlone = ({ values, resolve, reject }: Waiting) => {
    statements
      .read()
      .execute(values)
      .then((rows) => resolve(rows[0]), reject);
  };
  const readTogether = (now: string | undefined, reads: Waiting[]) => {
    if (reads.length === 1) return readAlone(reads[0] as Waiting);
    const scopes = reads.map(({ values }) => values.scope);
    const keys = reads.map(({ values }) => values.key);
    statements
      .readMany()
      .execute({ scopes, keys, now })
      .then(
        (rows) => {
          const found: (ReadRow | undefined)[] = new Array(reads.length);
          for (const row of rows) found[row.place - 1] = row;
          for (let index = 0; index < reads.length; index++) {
            (reads[index] as Waiting).resolve(found[index]);
          }
        },
        () => {
          for (const read of reads) readAlone(read);
        },
      );
  };
  // The reads of this turn, by the "now" they bind (none with the database's clock).
  let waiting = new Map<string | undefined, Waiting[]>();
  const send = () => {
    const turn = waiting;
    waiting = new Map();
    for (const [now, reads] of turn) {
      for (let start = 0; start < reads.length; start += MOST_KEYS) {
        readTogether(now, reads.slice(start, start + MOST_KEYS));
      }
    }
  };
  return (scope, key) =>
    new Promise((resolve, reject) => {
      const values = bind({ scope, key });
      if (waiting.size === 0) atEndOfTurn(send);
      let reads = waiting.get(values.now);
      if (!reads) {
        reads = [];
        waiting.set(values.now, reads);
      }
      reads.push({ values, resolve, reject });
    });
}
