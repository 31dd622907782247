/**
 * Sends the calls made in one turn of the event loop as one statement: the first call
 * schedules a flush (`setImmediate`, after the I/O callbacks of the turn), and every call
 * made before it runs joins the same batch. A busy server answers many requests per turn,
 * and each statement costs a socket write and a round of the driver and of Postgres,
 * whatever its size; an idle one sends a batch of one, through `single`, the very statement
 * it would send without batching.
 *
 * A batch holds each `idOf` once: a repeated call goes on its own, beside the batch, as it
 * would have without batching. When the batched statement fails with a Postgres error (the
 * statement was rolled back, so nothing of it happened: a deadlock between two batches, one
 * value the database refuses), every call of the batch runs again on its own, and only the
 * calls that fail on their own fail. Any other failure (a lost connection, whose statement
 * may have committed) fails every call of the batch with it.
 */
export function turnBatcher<Call, Result>(options: {
  /** Tells calls apart: at most one call per id goes into a batch. */
  idOf: (call: Call) => string;
  /** One call's statement. */
  single: (call: Call) => Promise<Result>;
  /** The batched statement: one result per call, in the calls' order. */
  many: (calls: readonly Call[]) => Promise<readonly Result[]>;
}): (call: Call) => Promise<Result> {
  const { idOf, single, many } = options;
  let queued: Pending<Call, Result>[] = [];

  const alone = (pending: Pending<Call, Result>) => {
    single(pending.call).then(pending.resolve, pending.reject);
  };

  const flush = () => {
    const taken = queued;
    queued = [];
    const ids = new Set<string>();
    const batch: Pending<Call, Result>[] = [];
    for (const pending of taken) {
      const id = idOf(pending.call);
      if (ids.has(id)) {
        alone(pending);
      } else {
        ids.add(id);
        batch.push(pending);
      }
    }
    if (batch.length === 1) {
      alone(batch[0]!);
      return;
    }
    many(batch.map((pending) => pending.call)).then(
      (results) => {
        batch.forEach((pending, index) => {
          pending.resolve(results[index]!);
        });
      },
      (error: unknown) => {
        if (isStatementError(error)) {
          for (const pending of batch) alone(pending);
        } else {
          for (const pending of batch) pending.reject(error);
        }
      },
    );
  };

  return (call) =>
    new Promise<Result>((resolve, reject) => {
      if (queued.push({ call, resolve, reject }) === 1) afterTurn(flush);
    });
}

/**
 * After this turn's I/O callbacks: `setImmediate` where the runtime has it (Node, Bun).
 * Taken when this module loads, so that a test which fakes timers later (`vi.useFakeTimers`
 * fakes `setImmediate` too) does not hold every claim back until it advances them.
 */
const immediate = globalThis.setImmediate;
const timeout = globalThis.setTimeout;
const afterTurn: (run: () => void) => void =
  typeof immediate === 'function' ? (run) => immediate(run) : (run) => timeout(run, 0);

interface Pending<Call, Result> {
  call: Call;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

/**
 * The statement failed in Postgres, so it was rolled back: the error (or the error Drizzle
 * wraps) carries a five-character SQLSTATE. Driver errors (a closed connection, a socket
 * reset) carry none, or a longer code of their own.
 */
function isStatementError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 3; depth++) {
    const code = (current as { code?: unknown }).code;
    // SQLSTATE classes start with a digit or F, H, P, X; `EPIPE` and its kin are Node's.
    if (typeof code === 'string' && /^[0-9FHPX][0-9A-Z]{4}$/.test(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
