import { describe, expect, it } from 'vitest';
import { gathered, refusedForACall } from './gathered.js';

/** A failure as drivers give it: Drizzle's wrapper, the driver's error its cause. */
const failure = (code?: string) =>
  new Error('Failed query', { cause: Object.assign(new Error('driver'), { code }) });

/** A gathering of numbers whose statements are recorded; `fail` makes a statement fail. */
function recorded(fail: (calls: readonly number[]) => Error | undefined) {
  const sent: number[][] = [];
  const send = gathered<number, number>({
    async alone(value) {
      sent.push([value]);
      const error = fail([value]);
      if (error) throw error;
      return value * 10;
    },
    async together(calls) {
      sent.push([...calls]);
      const error = fail(calls);
      if (error) throw error;
      return calls.map((value) => value * 10);
    },
    group: (value) => (value >= 100 ? 'late' : undefined),
    mayGather: (value) => value !== 7,
  });
  return { send, sent };
}

describe('gathered', () => {
  it('sends the calls of one turn as one statement per group, a call that may not go with others alone', async () => {
    const { send, sent } = recorded(() => undefined);
    const answers = await Promise.all([1, 2, 7, 100, 3, 101].map(send));
    expect(answers).toEqual([10, 20, 70, 1000, 30, 1010]);
    expect(sent).toEqual([[7], [1, 2, 3], [100, 101]]);
    // A call of a later turn goes in a statement of its own.
    expect(await send(4)).toBe(40);
    expect(sent.at(-1)).toEqual([4]);
  });

  it('sends each call again alone when the server refused the statement for a value', async () => {
    const { send, sent } = recorded((calls) => (calls.includes(2) ? failure('22021') : undefined));
    const answers = await Promise.allSettled([1, 2, 3].map(send));
    expect(answers.map((each) => (each.status === 'fulfilled' ? each.value : 'failed'))).toEqual([
      10,
      'failed',
      30,
    ]);
    expect(sent).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it('fails every call with any other failure, and sends nothing again', async () => {
    for (const error of [
      failure('08006'),
      failure('57014'),
      failure(),
      new Error('Query read timeout'),
    ]) {
      const { send, sent } = recorded(() => error);
      const answers = await Promise.allSettled([1, 2, 3].map(send));
      expect(answers.map((each) => each.status === 'rejected' && each.reason)).toEqual([
        error,
        error,
        error,
      ]);
      expect(sent).toEqual([[1, 2, 3]]);
    }
  });

  it('rejects a call whose statement throws while it is built, and still sends the others', async () => {
    const send = gathered<number, number>({
      alone: (value) => {
        if (value === 1) throw new Error('not built');
        return Promise.resolve(value);
      },
      together: () => Promise.reject(failure('22P02')),
      group: () => undefined,
    });
    const answers = await Promise.allSettled([1, 2].map(send));
    expect(answers.map((each) => each.status)).toEqual(['rejected', 'fulfilled']);
  });

  it('knows a refusal for a value by its SQLSTATE class: data, integrity, limits, rollback', () => {
    expect(
      ['22021', '23505', '54000', '40P01', '40001'].map((code) => refusedForACall(failure(code))),
    ).toEqual([true, true, true, true, true]);
    expect(
      ['08006', '57P01', '57014', '53300', '25006', 'CONNECTION_CLOSED'].some((code) =>
        refusedForACall(failure(code)),
      ),
    ).toBe(false);
  });
});
