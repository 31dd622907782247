import { describe, expect, it, vi } from 'vitest';
import { turnBatcher } from './turnBatcher.js';

/** A batcher over numbers whose statements are recorded, and fail as `fail` says. */
function recorded(fail: { many?: unknown; single?: (call: number) => unknown } = {}) {
  const statements: number[][] = [];
  const call = turnBatcher<number, string>({
    idOf: (value) => String(value % 100),
    single: async (value) => {
      statements.push([value]);
      const error = fail.single?.(value);
      if (error) throw error;
      return `one ${value}`;
    },
    many: async (values) => {
      statements.push([...values]);
      if (fail.many) throw fail.many;
      return values.map((value) => `many ${value}`);
    },
  });
  return { call, statements };
}

const settled = (promises: Promise<string>[]) =>
  Promise.all(promises.map((promise) => promise.catch((error: Error) => error.message)));

describe('turnBatcher', () => {
  it('sends the calls of one turn as one statement, and a lone call as a single one', async () => {
    const { call, statements } = recorded();
    expect(await Promise.all([call(1), call(2), call(3)])).toEqual(['many 1', 'many 2', 'many 3']);
    expect(await call(4)).toBe('one 4');
    expect(statements).toEqual([[1, 2, 3], [4]]);
  });

  it('puts a call whose id is already in the batch on its own', async () => {
    const { call, statements } = recorded();
    expect(await Promise.all([call(1), call(101), call(2)])).toEqual([
      'many 1',
      'one 101',
      'many 2',
    ]);
    expect(statements).toContainEqual([1, 2]);
    expect(statements).toContainEqual([101]);
  });

  it('runs every call of a batch Postgres refused on its own, and fails only the bad one', async () => {
    const refused = Object.assign(new Error('unsupported Unicode escape sequence'), {
      code: '22P05',
    });
    const { call, statements } = recorded({
      many: new Error('Failed query', { cause: refused }),
      single: (value) => (value === 2 ? refused : undefined),
    });
    expect(await settled([call(1), call(2), call(3)])).toEqual([
      'one 1',
      'unsupported Unicode escape sequence',
      'one 3',
    ]);
    expect(statements).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it('sends its batches while a test fakes the timers', async () => {
    vi.useFakeTimers();
    try {
      const { call } = recorded();
      expect(await Promise.all([call(1), call(2)])).toEqual(['many 1', 'many 2']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('fails every call of a batch whose connection failed, and sends nothing again', async () => {
    for (const code of ['CONNECTION_CLOSED', 'EPIPE', undefined]) {
      const lost = Object.assign(new Error('write EPIPE'), { code });
      const { call, statements } = recorded({ many: lost });
      expect(await settled([call(1), call(2)])).toEqual(['write EPIPE', 'write EPIPE']);
      expect(statements).toEqual([[1, 2]]);
    }
  });
});
