import { causeChain } from './connectionError.js';

/** The most calls one statement carries: a bound on its arrays and on its reply. */
const MOST_CALLS = 256;

/** How calls of one kind go out: alone, or several as one statement. */
export interface Gathering<Values, Answer> {
  /** The call as a statement of its own. */
  alone(values: Values): Promise<Answer>;
  /** Several calls as one statement: their answers, in the order of `calls`. */
  together(calls: readonly Values[]): Promise<Answer[]>;
  /** Calls that may share a statement (one "now"): the same group. */
  group(values: Values): string | undefined;
  /** Whether a call may go with others at all (else it goes alone, at once). */
  mayGather?(values: Values): boolean;
}

/**
 * SQLSTATE classes of a failure that one call's values can cause, or that the server's
 * handling of several rows at once can (data exceptions 22, integrity 23, program limits 54,
 * a serialization failure or deadlock, 40): the server answered, so the statement changed
 * nothing, and its calls go again, each alone, so that the failure stays with the call it
 * belongs to. Any other failure (a connection lost under the statement, which may have
 * committed; a timeout the driver raised while the statement ran on; an overloaded server)
 * fails every call of the statement with it, as a statement of its own would have failed.
 */
const ONE_CALLS_FAILURE = new Set(['22', '23', '54', '40']);

/** Whether the server refused a statement for what one of its calls holds (see above). */
export function refusedForACall(error: unknown): boolean {
  for (const { code } of causeChain(error)) {
    if (typeof code === 'string' && code.length === 5 && ONE_CALLS_FAILURE.has(code.slice(0, 2))) {
      return true;
    }
  }
  return false;
}

/** A call waiting for the end of the turn, with how to answer it. */
interface Waiting<Values, Answer> {
  values: Values;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/**
 * The end of this turn of the event loop, once the I/O it found ready has been handled: the
 * runtime's own `setImmediate`, kept when this module loads, so that an app's tests that fake
 * timers later do not hold the store's statements back.
 */
const atEndOfTurn: (run: () => void) => void = (() => {
  const immediate = globalThis.setImmediate;
  const timeout = globalThis.setTimeout;
  return typeof immediate === 'function' ? (run) => immediate(run) : (run) => timeout(run, 0);
})();

/** `send(values)`, a synchronous throw (a statement that failed to build) as a rejection. */
function settled<Values, Answer>(
  send: (values: Values) => Promise<Answer>,
  values: Values,
): Promise<Answer> {
  try {
    return send(values);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Calls gathered: those asked for during one turn of the event loop go out at its end
 * (`setImmediate`), a call alone as its own statement, several of one group as one
 * statement (at most 256). Under load a database then runs one statement for many calls, on
 * one connection, where it ran one per call on as many; a call asked for alone waits only for
 * the rest of the turn it was asked in. A statement of several that fails: see
 * `refusedForACall`.
 *
 * The statement runs in the async context of the call that opened its turn (a tracer that
 * follows the driver's statements puts it in that call's trace), and a call's statement no
 * longer starts while the rest of its turn's JavaScript runs.
 */
export function gathered<Values, Answer>(
  gathering: Gathering<Values, Answer>,
): (values: Values) => Promise<Answer> {
  const sendAlone = ({ values, resolve, reject }: Waiting<Values, Answer>) => {
    settled(gathering.alone, values).then(resolve, reject);
  };
  const sendTogether = (calls: Waiting<Values, Answer>[]) => {
    if (calls.length === 1) return sendAlone(calls[0] as Waiting<Values, Answer>);
    settled(
      gathering.together,
      calls.map(({ values }) => values),
    ).then(
      (answers) => {
        for (let index = 0; index < calls.length; index++) {
          (calls[index] as Waiting<Values, Answer>).resolve(answers[index] as Answer);
        }
      },
      (error: unknown) => {
        if (refusedForACall(error)) for (const call of calls) sendAlone(call);
        else for (const call of calls) call.reject(error);
      },
    );
  };
  let waiting = new Map<string | undefined, Waiting<Values, Answer>[]>();
  const send = () => {
    const turn = waiting;
    waiting = new Map();
    for (const calls of turn.values()) {
      for (let start = 0; start < calls.length; start += MOST_CALLS) {
        sendTogether(calls.slice(start, start + MOST_CALLS));
      }
    }
  };
  return (values) => {
    if (gathering.mayGather && !gathering.mayGather(values)) return gathering.alone(values);
    return new Promise((resolve, reject) => {
      if (waiting.size === 0) atEndOfTurn(send);
      const group = gathering.group(values);
      let calls = waiting.get(group);
      if (!calls) {
        calls = [];
        waiting.set(group, calls);
      }
      calls.push({ values, resolve, reject });
    });
  };
}
