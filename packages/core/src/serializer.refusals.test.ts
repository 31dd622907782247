import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import { taggedJsonSerializer } from './serializer.js';
import type { JsonValue } from './store/record.js';

const { serialize, deserialize } = taggedJsonSerializer;

/**
 * What `taggedJsonSerializer` refuses, with a typed error and the JSON Pointer of where: a
 * value it cannot write (a cycle, a function, a symbol), also from inside a toJSON it
 * called, and a tag it cannot read. What it keeps: serializer.test.ts.
 */
describe('taggedJsonSerializer', () => {
  it('refuses cycles, functions and symbols with a path', () => {
    const cyclic: Record<string, unknown> = { list: [] };
    (cyclic.list as unknown[]).push({ back: cyclic });
    const cases: [unknown, string, RegExp][] = [
      [cyclic, '/list/0/back', /cycle/],
      [{ a: { fn: () => 1 } }, '/a/fn', /function at \/a\/fn/],
      [[Symbol('s')], '/0', /symbol/],
      [() => 1, '', /function at the top level/],
      [new Map([['k', () => 1]]), '/$map/0/1', /function/],
      [{ 'a/b': Symbol('s') }, '/a~1b', /symbol/],
    ];
    for (const [value, path, message] of cases) {
      const error = thrown(() => serialize(value));
      expect(isUnserializableValueError(error)).toBe(true);
      expect(error).toMatchObject({ path });
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toMatch(/Return plain data|copy the fields/);
    }
  });

  it('serializes inside a toJSON called by a walk, and the walk goes on where it was', () => {
    const calls: unknown[] = [];
    const reentrant = {
      toJSON: () => {
        calls.push(serialize({ at: new Date(0) }));
        expect(() => serialize({ inner: [Symbol('s')] })).toThrow(
          expect.objectContaining({ path: '/inner/0' }),
        );
        return { done: true };
      },
    };
    expect(serialize({ list: [1, reentrant], after: 'x' })).toEqual({
      list: [1, { done: true }],
      after: 'x',
    });
    expect(calls).toEqual([{ at: { $date: '1970-01-01T00:00:00.000Z' } }]);
    const error = thrown(() => serialize({ list: [reentrant, { fn: () => 1 }] }));
    expect(error).toMatchObject({ path: '/list/1/fn' });
  });

  it('refuses malformed or unknown tags when reading', () => {
    const bad: JsonValue[] = [
      { $unknown: 1 },
      { $bigint: '1.5' },
      { $date: 'yesterday' },
      { $number: 'Eleven' },
      { $map: [[1]] },
      { $set: 'abc' },
      { $undefined: false },
      { $escaped: [1] },
    ];
    for (const json of bad) {
      expect(() => deserialize({ outer: [json] })).toThrow(
        expect.objectContaining({ code: 'UNSERIALIZABLE_VALUE' }),
      );
    }
  });
});
