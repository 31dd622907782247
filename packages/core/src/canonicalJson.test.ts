import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { canonicalJson } from './canonicalJson.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import { type Random, seededRandom } from './retry/Random.js';

/** Rebuilds plain objects (deeply) with their keys inserted in a shuffled order. */
function shuffleKeys(value: unknown, random: Random): unknown {
  if (Array.isArray(value)) return value.map((item) => shuffleKeys(item, random));
  if (value instanceof Map) {
    return new Map(shuffle([...value], random).map(([k, v]) => [k, shuffleKeys(v, random)]));
  }
  if (value instanceof Set) return new Set(shuffle([...value], random));
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  const entries = shuffle(Object.entries(value), random);
  const result: Record<string, unknown> = {};
  for (const [key, item] of entries) {
    Object.defineProperty(result, key, {
      value: shuffleKeys(item, random),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return result;
}

function shuffle<T>(items: T[], random: Random): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}

const anyValue = fc.anything({
  withBigInt: true,
  withDate: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withSparseArray: true,
  stringUnit: 'binary',
});

describe('canonicalJson', () => {
  it('sorts object keys at every depth', () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}',
    );
  });

  it('sorts keys by UTF-16 code unit, not by locale', () => {
    // 'Z' (0x5A) < 'a' (0x61) < 'é' (0xE9) < '😀' (0xD83D…) < 'ﬀ' (0xFB00)
    expect(canonicalJson({ ﬀ: 5, '😀': 4, é: 3, a: 2, Z: 1 })).toBe(
      '{"Z":1,"a":2,"é":3,"😀":4,"ﬀ":5}',
    );
  });

  it('sorts an object of many names as one of few (both ways of sorting)', () => {
    for (const size of [15, 16, 17, 40]) {
      const names = Array.from({ length: size }, (_, i) => `${['k', 'K', 'é', '😀'][i % 4]}${i}`);
      const sorted = [...names].sort();
      const text = `{${sorted.map((name) => `${JSON.stringify(name)}:1`).join(',')}}`;
      for (const seed of [1, 2, 3]) {
        const shuffled = Object.fromEntries(shuffle(names, seededRandom(seed)).map((n) => [n, 1]));
        expect(canonicalJson(shuffled)).toBe(text);
      }
    }
  });

  it('is the same text for any key order (property)', () => {
    fc.assert(
      fc.property(anyValue, fc.integer(), (value, seed) => {
        expect(canonicalJson(shuffleKeys(value, seededRandom(seed)))).toBe(canonicalJson(value));
      }),
    );
  });

  it('is valid JSON (property)', () => {
    fc.assert(
      fc.property(anyValue, (value) => {
        expect(() => JSON.parse(canonicalJson(value))).not.toThrow();
      }),
    );
  });

  it('matches a naive sorted-key JSON.stringify for JSON data (property)', () => {
    // Written out by hand: Object.fromEntries would put integer-like keys first again.
    const reference = (v: unknown): string =>
      Array.isArray(v)
        ? `[${v.map(reference).join(',')}]`
        : v !== null && typeof v === 'object'
          ? `{${Object.keys(v)
              .sort()
              .map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`)
              .join(',')}}`
          : JSON.stringify(v);
    fc.assert(
      fc.property(fc.jsonValue({ stringUnit: 'binary' }), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
    );
  });

  it('treats undefined, functions and symbols like JSON, and tags a top-level undefined', () => {
    expect(canonicalJson({ a: undefined, b: () => 1, c: Symbol('s'), d: 1 })).toBe('{"d":1}');
    expect(canonicalJson([undefined, () => 1, Symbol('s')])).toBe('[null,null,null]');
    // biome-ignore lint/suspicious/noSparseArray: a hole is what is being tested
    expect(canonicalJson([1, , 3])).toBe('[1,null,3]');
    expect(canonicalJson(undefined)).toBe('{"$undefined":true}');
    expect(canonicalJson(new Set([undefined]))).toBe('{"$set":[{"$undefined":true}]}');
    expect(canonicalJson(new Map([['a', undefined]]))).toBe('{"$map":[["a",{"$undefined":true}]]}');
  });

  it('tags numbers JSON cannot hold and writes -0 as 0', () => {
    expect(canonicalJson([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])).toBe(
      '[{"$number":"NaN"},{"$number":"Infinity"},{"$number":"-Infinity"}]',
    );
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson({ a: -0 })).toBe(canonicalJson({ a: 0 }));
    expect(canonicalJson(1e21)).toBe('1e+21');
  });

  it('tags dates, bigints, maps and sets', () => {
    expect(canonicalJson(new Date('2024-01-02T03:04:05.006Z'))).toBe(
      '{"$date":"2024-01-02T03:04:05.006Z"}',
    );
    expect(canonicalJson(new Date(Number.NaN))).toBe('{"$date":null}');
    expect(canonicalJson(-123n)).toBe('{"$bigint":"-123"}');
    expect(
      canonicalJson(
        new Map<unknown, unknown>([
          ['b', 2],
          ['a', 1],
        ]),
      ),
    ).toBe('{"$map":[["a",1],["b",2]]}');
    expect(canonicalJson(new Set([3, 1, 2]))).toBe('{"$set":[1,2,3]}');
    expect(canonicalJson(new Set([{ b: 1, a: 2 }]))).toBe('{"$set":[{"a":2,"b":1}]}');
  });

  it('distinguishes values that plain JSON would confuse', () => {
    const pairs: [unknown, unknown][] = [
      [1n, 1],
      [1n, '1'],
      [new Date(0), new Date(0).toISOString()],
      [Number.NaN, null],
      [undefined, null],
      [new Map([['a', 1]]), { a: 1 }],
      [new Set([1]), [1]],
      [{ a: null }, {}],
      [[], {}],
      ['1', 1],
      [true, 'true'],
      ['\ud800', '\ufffd'],
    ];
    for (const [a, b] of pairs) expect(canonicalJson(a)).not.toBe(canonicalJson(b));
  });

  it('unboxes boxed primitives and applies toJSON once', () => {
    expect(canonicalJson([new String('a'), new Number(1), new Boolean(false)])).toBe(
      '["a",1,false]',
    );
    const money = { amount: 5, toJSON: () => ({ cents: 500 }) };
    expect(canonicalJson({ money })).toBe('{"money":{"cents":500}}');
    const keyed = { toJSON: (key: string) => `key:${key}` };
    expect(canonicalJson({ x: keyed, y: [keyed] })).toBe('{"x":"key:x","y":["key:0"]}');
    const nested = { toJSON: () => ({ toJSON: () => 'never called', a: 1 }) };
    expect(canonicalJson(nested)).toBe('{"a":1}');
  });

  it('escapes strings with JSON.stringify, including lone surrogates', () => {
    expect(canonicalJson('a"b\\c\n\u0000\ud800')).toBe('"a\\"b\\\\c\\n\\u0000\\ud800"');
  });

  it('accepts an object referenced twice', () => {
    const shared = { a: 1 };
    expect(canonicalJson({ x: shared, y: [shared, shared] })).toBe(
      '{"x":{"a":1},"y":[{"a":1},{"a":1}]}',
    );
  });

  it('throws UnserializableValueError with the path of a cycle', () => {
    const root: Record<string, unknown> = { a: [{ b: null }] };
    ((root.a as unknown[])[0] as Record<string, unknown>).b = root.a;
    const error = thrown(() => canonicalJson(root));
    expect(isUnserializableValueError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'UNSERIALIZABLE_VALUE', path: '/a/0/b' });
    expect((error as Error).message).toMatch(
      /cycle: \/a\/0\/b refers back to \/a\. Pass plain data/,
    );
  });

  it('refuses input nested 10,000 deep with a typed error, not a stack overflow', () => {
    let deep: unknown = 1;
    for (let level = 0; level < 10_000; level++) deep = { a: deep };
    expect(() => canonicalJson(deep)).toThrow(
      expect.objectContaining({ code: 'UNSERIALIZABLE_VALUE', path: '/a'.repeat(1_000) }),
    );
    let kept: unknown = 1;
    for (let level = 0; level < 1_000; level++) kept = [kept];
    expect(canonicalJson(kept)).toBe(`${'['.repeat(1_000)}1${']'.repeat(1_000)}`);
  });

  it('finds cycles through maps, sets and escaped keys', () => {
    const map = new Map<string, unknown>();
    map.set('self', map);
    expect(() => canonicalJson({ m: map })).toThrow(expect.objectContaining({ path: '/m/self' }));
    const set = new Set<unknown>();
    set.add(set);
    expect(() => canonicalJson(set)).toThrow(expect.objectContaining({ path: '/0' }));
    const slashed: Record<string, unknown> = {};
    slashed['a/b~c'] = slashed;
    expect(() => canonicalJson(slashed)).toThrow(expect.objectContaining({ path: '/a~1b~0c' }));
  });
});
