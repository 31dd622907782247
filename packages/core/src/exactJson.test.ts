import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { canonicalJson } from './canonicalJson.js';
import { isUnserializableValueError } from './errors/UnserializableValueError.js';
import { canonicalDecimal, exactJson } from './exactJson.js';

/** The canonical text a JSON body is fingerprinted by. */
const canonicalOf = (text: string) => canonicalJson(exactJson(text, JSON.parse(text)));

describe('exactJson', () => {
  it('returns what JSON.parse made when every number is exactly its double', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        const parsed: unknown = JSON.parse(text);
        expect(canonicalJson(exactJson(text, parsed))).toBe(canonicalJson(parsed));
      }),
      { numRuns: 1_000 },
    );
  });

  it('tells apart integers beyond 2^53 that JSON.parse reads as one double', () => {
    expect(JSON.parse('9007199254740993')).toBe(JSON.parse('9007199254740992'));
    expect(canonicalOf('{"amount":9007199254740993}')).not.toBe(
      canonicalOf('{"amount":9007199254740992}'),
    );
    expect(canonicalOf('{"amount":9007199254740993}')).toBe(
      '{"amount":{"$number":"9007199254740993e0"}}',
    );
    // 2^53 itself is a double exactly: written as before.
    expect(canonicalOf('[9007199254740992]')).toBe('[9007199254740992]');
    expect(canonicalOf('[12345678901234567890123]')).not.toBe(
      canonicalOf('[12345678901234567890124]'),
    );
  });

  it('tells apart decimals and out-of-range numbers a double rounds together', () => {
    expect(canonicalOf('[0.1000000000000000000001]')).not.toBe(canonicalOf('[0.1]'));
    expect(canonicalOf('[1e400]')).not.toBe(canonicalOf('[2e400]'));
    expect(canonicalOf('[1e-400]')).not.toBe(canonicalOf('[0]'));
    expect(canonicalOf('[1e400]')).not.toBe(canonicalJson([Number.POSITIVE_INFINITY]));
  });

  it('gives one number one text however it is written', () => {
    const spellings = ['1', '1.0', '10e-1', '1e0', '0.1E1', '1.000000000000000000000'];
    for (const spelling of spellings) expect(canonicalOf(`[${spelling}]`)).toBe('[1]');
    expect(canonicalOf('[9007199254740993]')).toBe(canonicalOf('[9007199254740993.000e0]'));
    expect(canonicalOf('[9007199254740993]')).toBe(canonicalOf('[90071992547409930e-1]'));
    expect(canonicalOf('[-0]')).toBe('[0]');
  });

  it('keeps the rest of the value as JSON.parse does: last repeated member, __proto__, strings', () => {
    const text =
      '{"a":1,"__proto__":{"x":2},"s":"9007199254740993 \\" 1e400","a":9007199254740993}';
    expect(canonicalOf(text)).toBe(
      '{"__proto__":{"x":2},"a":{"$number":"9007199254740993e0"},"s":"9007199254740993 \\" 1e400"}',
    );
    // Digits inside a string alone are no reason to parse again: the value is JSON.parse's.
    const parsed: unknown = JSON.parse('{"id":"12345678901234567890"}');
    expect(exactJson('{"id":"12345678901234567890"}', parsed)).toBe(parsed);
  });

  it('refuses nesting deeper than 1,000 levels with UnserializableValueError', () => {
    const text = `${'['.repeat(1_500)}9007199254740993${']'.repeat(1_500)}`;
    const refused = thrown(() => exactJson(text, JSON.parse(text)));
    expect(isUnserializableValueError(refused)).toBe(true);
  });

  it('reads a hostile exponent of a million digits quickly and exactly', () => {
    const huge = `1e${'9'.repeat(1_000_000)}`;
    expect(canonicalDecimal(huge)).toBe(huge);
    expect(canonicalDecimal(`10e${'9'.repeat(1_000_000)}`)).toBe(`1e1${'0'.repeat(1_000_000)}`);
    expect(canonicalDecimal(`0.1e-${'0'.repeat(20)}1`)).toBe(`1e-2`);
    expect(canonicalDecimal(`100e-1${'0'.repeat(15)}`)).toBe(`1e-${'9'.repeat(14)}8`);
  });

  it('reads a hostile literal of a million zeros between two digits in one pass', () => {
    // Trimming the zeros with /0+$/ took minutes here (each run of zeros tried to its end).
    const zeros = '0'.repeat(1_000_000);
    expect(canonicalDecimal(`1${zeros}1`)).toBe(`1${zeros}1e0`);
    expect(canonicalDecimal(`0.${zeros}1`)).toBe('1e-1000001');
    expect(canonicalDecimal(`1${zeros}`)).toBe('1e1000000');
    const body = `{"cents":1${zeros}1}`;
    expect(exactJson(body, JSON.parse(body))).toEqual({ cents: expect.anything() });
  });
});

describe('canonicalDecimal', () => {
  it('gives equal values equal texts and unequal values unequal texts', () => {
    const decimal = fc.record({
      negative: fc.boolean(),
      digits: fc.stringMatching(/^[1-9][0-9]{0,30}$/),
      exponent: fc.integer({ min: -400, max: 400 }),
    });
    /** One value spelled with its point moved and zeros padded. */
    const spell = (d: { negative: boolean; digits: string; exponent: number }, pad: number) => {
      const padded = `${'0'.repeat(pad)}${d.digits}${'0'.repeat(pad)}`;
      return `${d.negative ? '-' : ''}${padded}e${d.exponent - pad}`;
    };
    fc.assert(
      fc.property(decimal, decimal, fc.nat(5), fc.nat(5), (a, b, padA, padB) => {
        expect(canonicalDecimal(spell(a, padA))).toBe(canonicalDecimal(spell(a, padB)));
        const same =
          canonicalDecimal(`${a.negative ? '-' : ''}${a.digits}e${a.exponent}`) ===
          canonicalDecimal(`${b.negative ? '-' : ''}${b.digits}e${b.exponent}`);
        const value = (d: typeof a) =>
          `${d.negative}:${d.digits.replace(/0+$/, '')}:${d.exponent + d.digits.length - d.digits.replace(/0+$/, '').length}`;
        expect(same).toBe(value(a) === value(b));
      }),
      { numRuns: 2_000 },
    );
  });
});
