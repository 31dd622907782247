/** How a {@link coalesced} function sends its calls. */
export interface CoalescedOptions<TCall, TAnswer> {
  /**
   * How many statements may be in flight at once; a call made while that many are goes
   * out with the others that wait, as one statement, as soon as one returns.
   */
  inFlight: number;
  /** The most calls one statement carries. */
  maxCalls: number;
  /** One call as its own statement. */
  one(call: TCall): Promise<TAnswer>;
  /** Several calls as one statement: their answers, in the order of `calls`. */
  many(calls: readonly TCall[]): Promise<TAnswer[]>;
  /**
   * What names the row a call writes, when one statement cannot write a row twice: two
   * calls on one row then never share a statement, and the later waits for the next one.
   * @default undefined (any calls may share a statement)
   */
  rowOf?(call: TCall): string;
}

interface Waiting<TCall, TAnswer> {
  call: TCall;
  resolve(answer: TAnswer): void;
  reject(error: unknown): void;
}

/**
 * A call that goes to the database as its own statement while the database keeps up, and
 * together with the calls that wait beside it when it does not.
 *
 * Nothing waits for company: while fewer than `inFlight` statements are out, a call is
 * sent at once, alone, just as it would be without this. Only calls that would queue anyway
 * (behind `inFlight` statements already out) are gathered, and they leave as one statement
 * the moment one of those returns: one round trip, one socket write and one parse of the
 * reply instead of one of each per call. So the busier the server, the fewer statements
 * per call, and an idle one sends exactly what it did before.
 *
 * A statement carrying several calls that fails is retried call by call, so a call's
 * error is its own (a value the database refuses fails that call only).
 */
export function coalesced<TCall, TAnswer>(
  options: CoalescedOptions<TCall, TAnswer>,
): (call: TCall) => Promise<TAnswer> {
  const { inFlight, maxCalls } = options;
  let out = 0;
  let waiting: Waiting<TCall, TAnswer>[] = [];

  const settle = (entry: Waiting<TCall, TAnswer>, answer: Promise<TAnswer>) =>
    answer.then(entry.resolve, entry.reject);

  const send = async (batch: Waiting<TCall, TAnswer>[]) => {
    out++;
    try {
      if (batch.length === 1) {
        await settle(batch[0]!, options.one(batch[0]!.call));
        return;
      }
      let answers: TAnswer[];
      try {
        answers = await options.many(batch.map((entry) => entry.call));
      } catch {
        await Promise.all(batch.map((entry) => settle(entry, options.one(entry.call))));
        return;
      }
      for (const [index, entry] of batch.entries()) entry.resolve(answers[index]!);
    } finally {
      out--;
      drain();
    }
  };

  const drain = () => {
    while (out < inFlight && waiting.length > 0) {
      const { rowOf } = options;
      if (!rowOf || waiting.length === 1) {
        void send(waiting.splice(0, maxCalls));
        continue;
      }
      const rows = new Set<string>();
      const batch: Waiting<TCall, TAnswer>[] = [];
      const later: Waiting<TCall, TAnswer>[] = [];
      for (const entry of waiting) {
        const row = rowOf(entry.call);
        if (batch.length < maxCalls && !rows.has(row)) {
          rows.add(row);
          batch.push(entry);
        } else later.push(entry);
      }
      waiting = later;
      void send(batch);
    }
  };

  return (call) =>
    new Promise<TAnswer>((resolve, reject) => {
      waiting.push({ call, resolve, reject });
      drain();
    });
}
