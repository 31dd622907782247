import { describe, expect, it } from 'vitest';
import { coalesced } from './coalesced.js';

interface Call {
  row: string;
  value: number;
}

/** A database stand-in whose statements return only when the test says. */
function fakeDatabase({ failMany = false, refuse = -1, byRow = true } = {}) {
  const statements: Call[][] = [];
  const pending: (() => void)[] = [];
  const answer = (call: Call) => {
    if (call.value === refuse) throw new Error(`refused ${call.value}`);
    return call.value * 10;
  };
  const later = <T>(calls: Call[], result: () => T) => {
    statements.push(calls);
    return new Promise<T>((resolve, reject) => {
      pending.push(() => {
        try {
          resolve(result());
        } catch (error) {
          reject(error);
        }
      });
    });
  };
  const send = coalesced<Call, number>({
    inFlight: 1,
    maxCalls: 3,
    one: (call) => later([call], () => answer(call)),
    many: (calls) =>
      later([...calls], () => {
        if (failMany) throw new Error('the statement failed');
        return calls.map(answer);
      }),
    ...(byRow && { rowOf: (call: Call) => call.row }),
  });
  /** Lets the oldest statement return, then lets the calls it freed go out. */
  const returnOne = async () => {
    pending.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { send, statements, pending, returnOne };
}

const call = (value: number, row = `row-${value}`): Call => ({ row, value });

describe('coalesced', () => {
  it('sends a call on its own, at once, while nothing is in flight', async () => {
    const database = fakeDatabase();
    const answer = database.send(call(1));
    expect(database.statements).toEqual([[call(1)]]);
    await database.returnOne();
    await expect(answer).resolves.toBe(10);
  });

  it('sends the calls that waited behind a statement as one, when it returns', async () => {
    const database = fakeDatabase();
    const answers = [1, 2, 3, 4].map((value) => database.send(call(value)));
    expect(database.statements).toEqual([[call(1)]]);
    await database.returnOne();
    expect(database.statements).toEqual([[call(1)], [call(2), call(3), call(4)]]);
    await database.returnOne();
    await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30, 40]);
  });

  it('carries at most maxCalls calls, and never two calls on one row, in one statement', async () => {
    const database = fakeDatabase();
    const calls = [call(1), call(2, 'a'), call(3, 'a'), call(4), call(5), call(6)];
    const answers = calls.map((c) => database.send(c));
    await database.returnOne();
    await database.returnOne();
    await database.returnOne();
    expect(database.statements).toEqual([
      [call(1)],
      [call(2, 'a'), call(4), call(5)],
      [call(3, 'a'), call(6)],
    ]);
    await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30, 40, 50, 60]);
  });

  it('lets calls on one row share a statement when rows do not matter', async () => {
    const database = fakeDatabase({ byRow: false });
    const answers = [call(1), call(2, 'a'), call(3, 'a')].map((c) => database.send(c));
    await database.returnOne();
    expect(database.statements).toEqual([[call(1)], [call(2, 'a'), call(3, 'a')]]);
    await database.returnOne();
    await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30]);
  });

  it('retries a failed statement call by call, so each call gets its own answer or error', async () => {
    const database = fakeDatabase({ failMany: true, refuse: 3 });
    const answers = [1, 2, 3].map((value) => database.send(call(value)).catch((e: Error) => e));
    await database.returnOne(); // 1 alone
    await database.returnOne(); // 2 and 3 together: fails
    expect(database.statements.slice(2)).toEqual([[call(2)], [call(3)]]);
    await database.returnOne();
    await database.returnOne();
    const [one, two, three] = await Promise.all(answers);
    expect([one, two]).toEqual([10, 20]);
    expect(three).toBeInstanceOf(Error);
    expect((three as Error).message).toBe('refused 3');
  });

  it('lets the next calls go after a call fails', async () => {
    const database = fakeDatabase({ refuse: 1 });
    const first = database.send(call(1)).catch((e: Error) => e.message);
    const second = database.send(call(2));
    await database.returnOne();
    await expect(first).resolves.toBe('refused 1');
    expect(database.statements).toEqual([[call(1)], [call(2)]]);
    await database.returnOne();
    await expect(second).resolves.toBe(20);
  });
});
