import { deepStrictEqual } from 'node:assert/strict';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import { taggedJsonSerializer } from './serializer.js';
import type { JsonValue } from './store/record.js';

const { serialize, deserialize } = taggedJsonSerializer;

/** What a store does to the value: JSON text in, JSON text out. */
function roundTrip(value: unknown): unknown {
  const stored = JSON.parse(JSON.stringify(serialize(value))) as JsonValue;
  return deserialize(stored);
}

/** Only null, booleans, finite numbers other than -0, strings, arrays and plain objects. */
function isExactJson(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value) && !Object.is(value, -0);
  if (Array.isArray(value))
    return value.length === Object.keys(value).length && value.every(isExactJson);
  return (
    typeof value === 'object' &&
    Object.getPrototypeOf(value) === Object.prototype &&
    Object.values(value).every(isExactJson)
  );
}

const tagLikeKey = fc.constantFrom(
  '$date',
  '$bigint',
  '$map',
  '$set',
  '$undefined',
  '$number',
  '$escaped',
  '$other',
  '$',
  '__proto__',
  'constructor',
);

const plainData = fc.anything({
  key: fc.oneof(fc.string({ unit: 'binary' }), tagLikeKey),
  withBigInt: true,
  withMap: true,
  withSet: true,
  stringUnit: 'binary',
  values: [
    fc.string({ unit: 'binary' }),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constantFrom(null, undefined, -0, 0, Number.NaN, Number.POSITIVE_INFINITY),
    fc.constant(Number.NEGATIVE_INFINITY),
    fc.bigInt(),
    // Invalid dates are covered by an example: node:assert never finds two of them equal.
    fc.date({ noInvalidDate: true }),
    fc.dictionary(tagLikeKey, fc.oneof(fc.string(), fc.integer(), fc.constant(undefined)), {
      maxKeys: 2,
      noNullPrototype: true,
    }),
  ],
});

/** What `taggedJsonSerializer` keeps, exactly. What it refuses: serializer.refusals.test.ts. */
describe('taggedJsonSerializer', () => {
  it('round-trips arbitrary plain data exactly, through JSON text (property)', () => {
    fc.assert(
      fc.property(plainData, (value) => {
        // node:assert rather than toStrictEqual: it compares -0 with Object.is, checks
        // prototypes, and is not confused by an own property named "constructor".
        deepStrictEqual(roundTrip(value), value);
      }),
    );
  });

  it('produces only values JSON holds exactly (property)', () => {
    fc.assert(
      fc.property(plainData, (value) => {
        const json = serialize(value);
        expect(isExactJson(json)).toBe(true);
        deepStrictEqual(JSON.parse(JSON.stringify(json)), json);
      }),
    );
  });

  it('keeps the types superjson apps return', () => {
    const value = {
      createdAt: new Date('2024-01-02T03:04:05.006Z'),
      total: 12345678901234567890n,
      tags: new Set(['a', 'b']),
      byId: new Map<unknown, unknown>([
        [1, { name: 'one' }],
        [{ composite: true }, [new Date(0)]],
      ]),
      nested: [{ at: new Date(1) }],
    };
    const result = roundTrip(value) as typeof value;
    expect(result).toStrictEqual(value);
    expect(result.createdAt).toBeInstanceOf(Date);
    expect(typeof result.total).toBe('bigint');
    expect([...result.byId.keys()]).toStrictEqual([1, { composite: true }]);
  });

  it('keeps undefined, special numbers and -0', () => {
    expect(roundTrip(undefined)).toBeUndefined();
    const value = { a: undefined, list: [undefined, Number.NaN, -0, 0, Number.NEGATIVE_INFINITY] };
    const result = roundTrip(value) as typeof value;
    expect(Object.hasOwn(result, 'a')).toBe(true);
    expect(result).toStrictEqual(value);
    expect(Object.is(result.list[2], -0)).toBe(true);
    expect(Object.is(result.list[3], 0)).toBe(true);
    expect(Object.is(roundTrip(-0), -0)).toBe(true);
    expect(serialize(Number.POSITIVE_INFINITY)).toStrictEqual({ $number: 'Infinity' });
  });

  it('turns array holes into undefined elements', () => {
    // biome-ignore lint/suspicious/noSparseArray: a hole is what is being tested
    const result = roundTrip([1, , 3]) as unknown[];
    expect(result).toHaveLength(3);
    expect(1 in result).toBe(true);
    expect(result[1]).toBeUndefined();
  });

  it('keeps invalid dates invalid', () => {
    const result = roundTrip(new Date(Number.NaN));
    expect(result).toBeInstanceOf(Date);
    expect(Number.isNaN((result as Date).getTime())).toBe(true);
  });

  it('escapes user objects that look like tags', () => {
    const lookalikes = [
      { $date: '2024-01-01T00:00:00.000Z' },
      { $undefined: true },
      { $escaped: { $escaped: {} } },
      { $unknown: 1 },
      { $map: [['a', 1]] },
    ];
    for (const value of lookalikes) {
      expect(serialize(value)).toHaveProperty('$escaped');
      expect(roundTrip(value)).toStrictEqual(value);
    }
    // Two keys cannot be a tag, so they need no escape.
    expect(serialize({ $date: 'x', other: 1 })).toStrictEqual({ $date: 'x', other: 1 });
  });

  it('keeps "__proto__" as data and never touches prototypes', () => {
    const stored = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as JsonValue;
    const result = deserialize(stored) as Record<string, unknown>;
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.hasOwn(result, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(serialize(result)).toStrictEqual(stored);
  });

  it('unboxes boxed primitives and uses toJSON for other objects', () => {
    expect(roundTrip([new String('a'), new Number(-0), new Boolean(true)])).toStrictEqual([
      'a',
      -0,
      true,
    ]);
    class Money {
      constructor(readonly cents: number) {}
      toJSON() {
        return { cents: this.cents, currency: 'EUR' };
      }
    }
    expect(roundTrip({ price: new Money(500) })).toStrictEqual({
      price: { cents: 500, currency: 'EUR' },
    });
  });

  it('copies an object referenced twice', () => {
    const shared = { a: 1 };
    const result = roundTrip([shared, shared]) as unknown[];
    expect(result).toStrictEqual([{ a: 1 }, { a: 1 }]);
  });

  it('keeps 1,000 levels of nesting and refuses deeper with a typed error, not a stack overflow', () => {
    const nested = (depth: number) => {
      let value: unknown = 'bottom';
      for (let level = 0; level < depth; level++) value = [{ inner: value }];
      return value;
    };
    // Each level is an array holding an object: two levels of nesting.
    expect(roundTrip(nested(500))).toEqual(nested(500));
    const error = thrown(() => serialize(nested(10_000)));
    expect(isUnserializableValueError(error)).toBe(true);
    expect((error as Error).message).toMatch(/nested more than 1000 levels deep/);
    expect((error as { path: string }).path).toMatch(/^(\/0\/inner){500}$/);
  });
});

describe('taggedJsonSerializer and text Postgres cannot store', () => {
  const unstorable =
    // biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what this must find.
    /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

  it('round-trips U+0000 and lone surrogates in values and keys, storing neither', () => {
    const value = {
      nul: 'a\u0000b',
      high: 'x\ud800',
      low: '\udc00y',
      pair: '𝄞 stays as it is',
      list: ['\u0000'],
      'key\u0000with nul': { 'lone\udfff': 1 },
    };
    const stored = JSON.stringify(taggedJsonSerializer.serialize(value));
    expect(unstorable.test(stored.replace(/\\u[0-9a-f]{4}/gi, ''))).toBe(false);
    expect(stored).not.toMatch(/\\u0000|\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
    expect(taggedJsonSerializer.deserialize(JSON.parse(stored))).toEqual(value);
    expect(taggedJsonSerializer.serialize('𝄞')).toBe('𝄞');
  });

  it('never writes an unstorable string, for any UTF-16 input', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' })),
        (value) => {
          const stored = taggedJsonSerializer.serialize(value);
          const strings: string[] = [];
          JSON.stringify(stored, (key, inner) => {
            strings.push(key);
            if (typeof inner === 'string') strings.push(inner);
            return inner;
          });
          for (const text of strings) expect(unstorable.test(text)).toBe(false);
          expect(taggedJsonSerializer.deserialize(stored)).toEqual(value);
        },
      ),
    );
  });
});
