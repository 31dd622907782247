import { isConnectionError } from './connectionError.js';

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
  /**
   * Whether the calls of a statement that failed with `error` go again, each alone: always for
   * a read; for a write only when the server answered the failure (the statement then changed
   * nothing), never for a connection lost under it, which may have committed: each call fails
   * with that error and its caller decides (`retryLostConnection`).
   */
  againAlone(error: unknown): boolean;
}

/** A write's statement failed where the server could answer: it changed nothing. */
export const answeredByServer = (error: unknown) => !isConnectionError(error);

/** A call waiting for the end of the turn, with how to answer it. */
interface Waiting<Values, Answer> {
  values: Values;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/** The end of this turn of the event loop, once the I/O it found ready has been handled. */
const atEndOfTurn: (run: () => void) => void =
  typeof setImmediate === 'function' ? (run) => setImmediate(run) : (run) => setTimeout(run, 0);

/**
 * Calls gathered: those asked for during one turn of the event loop go out at its end
 * (`setImmediate`), a call alone as its own statement, several of one group as one
 * statement (at most 256). Under load a database then runs one statement for many calls, on
 * one connection, where it ran one per call on as many; a call asked for alone waits only for
 * the rest of the turn it was asked in.
 */
export function gathered<Values, Answer>(
  gathering: Gathering<Values, Answer>,
): (values: Values) => Promise<Answer> {
  const sendAlone = ({ values, resolve, reject }: Waiting<Values, Answer>) => {
    gathering.alone(values).then(resolve, reject);
  };
  const sendTogether = (calls: Waiting<Values, Answer>[]) => {
    if (calls.length === 1) return sendAlone(calls[0] as Waiting<Values, Answer>);
    gathering.together(calls.map(({ values }) => values)).then(
      (answers) => {
        for (let index = 0; index < calls.length; index++) {
          (calls[index] as Waiting<Values, Answer>).resolve(answers[index] as Answer);
        }
      },
      (error: unknown) => {
        if (gathering.againAlone(error)) for (const call of calls) sendAlone(call);
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
