import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryAfterSeconds } from './retryAfter.js';

// Sun, 06 Nov 1994 08:49:37 GMT: the example date of RFC 9110.
const EXAMPLE_MS = Date.UTC(1994, 10, 6, 8, 49, 37);
const NOW_MS = EXAMPLE_MS - 30_000;

describe('parseRetryAfter', () => {
  it.each([
    ['0', 0],
    ['120', 120_000],
    ['  7\t', 7000],
    ['007', 7000],
  ])('reads delay-seconds %j', (value, expected) => {
    expect(parseRetryAfter(value, NOW_MS)).toBe(expected);
  });

  it.each([
    ['IMF-fixdate', 'Sun, 06 Nov 1994 08:49:37 GMT'],
    ['RFC 850', 'Sunday, 06-Nov-94 08:49:37 GMT'],
    ['asctime', 'Sun Nov  6 08:49:37 1994'],
    ['IMF-fixdate with surrounding spaces', '  Sun, 06 Nov 1994 08:49:37 GMT '],
  ])('reads an HTTP-date in %s form', (_form, value) => {
    expect(parseRetryAfter(value, NOW_MS)).toBe(30_000);
  });

  it('reads a two-digit-day asctime date', () => {
    expect(parseRetryAfter('Thu Nov 16 08:49:37 1994', EXAMPLE_MS)).toBe(10 * 86_400_000);
  });

  it('gives 0 for a date in the past', () => {
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', EXAMPLE_MS + 60_000)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:00 GMT', Date.now())).toBe(0);
  });

  it('reads a two-digit year as at most 50 years ahead (RFC 9110 §5.6.7)', () => {
    const now2030 = Date.UTC(2030, 0, 1);
    // 79 → 2079 is within 50 years of 2030; 81 → 2081 is not, so it means 1981 (past → 0).
    expect(parseRetryAfter('Sunday, 01-Jan-79 00:00:00 GMT', now2030)).toBe(
      Date.UTC(2079, 0, 1) - now2030,
    );
    expect(parseRetryAfter('Thursday, 01-Jan-81 00:00:00 GMT', now2030)).toBe(0);
  });

  it('accepts a leap second', () => {
    expect(parseRetryAfter('Sat, 31 Dec 2016 23:59:60 GMT', Date.UTC(2016, 11, 31, 23, 59))).toBe(
      60_000,
    );
  });

  it.each([
    [undefined],
    [null],
    [''],
    ['   '],
    ['-1'],
    ['+5'],
    ['1.5'],
    ['5s'],
    ['1e3'],
    ['0x10'],
    ['soon'],
    ['123abc'],
    ['Infinity'],
    ['2024-01-01T00:00:00Z'],
    ['Sun, 06 Nov 1994 08:49:37 UTC'],
    ['sun, 06 nov 1994 08:49:37 gmt'],
    ['Sun, 6 Nov 1994 08:49:37 GMT'],
    ['Sun, 06 Nov 94 08:49:37 GMT'],
    ['Sun, 31 Feb 1994 08:49:37 GMT'],
    ['Sun, 06 Nov 1994 24:00:00 GMT'],
    ['Sun, 06 Nov 1994 08:60:00 GMT'],
    ['Sun, 06 Nov 1994 08:49:61 GMT'],
    ['Sun, 06 Foo 1994 08:49:37 GMT'],
    ['Sun, 00 Nov 1994 08:49:37 GMT'],
    ['Sun, 06 Nov 1994 08:49:37 GMT extra'],
    ['Sun,  06 Nov 1994 08:49:37 GMT'],
    ['Sun Nov 6 08:49:37 1994'],
    ['Sunday, 06-Nov-1994 08:49:37 GMT'],
    ['5, 6'],
  ])('refuses %j', (value) => {
    expect(parseRetryAfter(value, NOW_MS)).toBeUndefined();
  });

  it('caps huge values without overflowing', () => {
    expect(parseRetryAfter('99999999999999999999', NOW_MS)).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseRetryAfter('9'.repeat(400), NOW_MS)).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseRetryAfter('Fri, 31 Dec 9999 23:59:59 GMT', 0)).toBe(
      Date.UTC(9999, 11, 31, 23, 59, 59),
    );
  });

  it('refuses a non-finite nowMs', () => {
    expect(() => parseRetryAfter('5', Number.NaN)).toThrow(RangeError);
  });

  it('round-trips Date#toUTCString (property)', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('1970-01-01T00:00:00Z'),
          max: new Date('9999-12-31T23:59:59Z'),
          noInvalidDate: true,
        }),
        fc.date({
          min: new Date('1970-01-01T00:00:00Z'),
          max: new Date('9999-12-31T23:59:59Z'),
          noInvalidDate: true,
        }),
        (date, now) => {
          const dateMs = Math.floor(date.getTime() / 1000) * 1000;
          expect(parseRetryAfter(date.toUTCString(), now.getTime())).toBe(
            Math.max(0, dateMs - now.getTime()),
          );
        },
      ),
    );
  });

  it('returns a finite non-negative number or undefined for any string (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary' }),
        fc.integer({ min: 0, max: 2 ** 52 }),
        (value, nowMs) => {
          const delay = parseRetryAfter(value, nowMs);
          if (delay !== undefined) {
            expect(Number.isFinite(delay)).toBe(true);
            expect(delay).toBeGreaterThanOrEqual(0);
          }
        },
      ),
    );
  });
});

describe('retryAfterSeconds', () => {
  it('rounds up to whole seconds, never below 0, and parseRetryAfter reads back at least the wait', () => {
    expect(retryAfterSeconds(0)).toBe(0);
    expect(retryAfterSeconds(-5)).toBe(0);
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(1_000)).toBe(1);
    expect(retryAfterSeconds(1_001)).toBe(2);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (ms) => {
        const header = String(retryAfterSeconds(ms));
        const parsed = parseRetryAfter(header, 0);
        if (parsed === undefined) throw new Error(`Retry-After: ${header} did not parse`);
        expect(parsed).toBeGreaterThanOrEqual(ms);
        expect(parsed - ms).toBeLessThan(1_000);
      }),
    );
  });
});
