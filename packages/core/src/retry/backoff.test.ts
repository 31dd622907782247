import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelay } from './backoff.js';
import { seededRandom } from './Random.js';

describe('backoffDelay', () => {
  it('is random() times the capped exponential ceiling', () => {
    const options = { baseDelayMs: 100, maxDelayMs: 1000, random: () => 0.5 };
    expect([0, 1, 2, 3, 4, 10].map((attempt) => backoffDelay({ ...options, attempt }))).toEqual([
      50, 100, 200, 400, 500, 500,
    ]);
    expect(backoffDelay({ ...options, attempt: 3, random: () => 0 })).toBe(0);
  });

  it('stays in [0, min(max, base·2^n)] (property)', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 5000 }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 0, max: 1e12, noNaN: true }),
        fc.integer(),
        (attempt, baseDelayMs, maxDelayMs, seed) => {
          const delay = backoffDelay({
            attempt,
            baseDelayMs,
            maxDelayMs,
            random: seededRandom(seed),
          });
          expect(Number.isFinite(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(0);
          // 0 · 2^1024 would be NaN: a zero base means a zero ceiling.
          const ceilingMs =
            baseDelayMs === 0 ? 0 : Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
          expect(delay).toBeLessThanOrEqual(ceilingMs);
        },
      ),
    );
  });

  it('does not overflow for huge attempts', () => {
    const random = () => 0.999;
    for (const attempt of [1023, 1024, 5000, Number.MAX_SAFE_INTEGER]) {
      expect(backoffDelay({ attempt, baseDelayMs: 1, maxDelayMs: 30_000, random })).toBeCloseTo(
        29_970,
      );
      expect(backoffDelay({ attempt, baseDelayMs: 0, maxDelayMs: 30_000, random })).toBe(0);
      expect(
        backoffDelay({ attempt, baseDelayMs: Number.MAX_VALUE, maxDelayMs: 1000, random }),
      ).toBeCloseTo(999);
    }
  });

  it('uses Math.random by default', () => {
    const delay = backoffDelay({ attempt: 2, baseDelayMs: 100, maxDelayMs: 1000 });
    expect(delay).toBeGreaterThanOrEqual(0);
    expect(delay).toBeLessThan(400);
  });

  it.each([
    [{ attempt: -1 }, /attempt must be a non-negative integer/],
    [{ attempt: 1.5 }, /attempt must be a non-negative integer/],
    [{ attempt: Number.NaN }, /attempt/],
    [{ attempt: Number.POSITIVE_INFINITY }, /attempt/],
    [{ baseDelayMs: -1 }, /baseDelayMs must be a finite number of milliseconds, 0 or more/],
    [{ baseDelayMs: Number.NaN }, /baseDelayMs/],
    [{ maxDelayMs: Number.POSITIVE_INFINITY }, /maxDelayMs/],
    [{ random: () => 1 }, /random\(\) must return a number in \[0, 1\); got 1/],
    [{ random: () => Number.NaN }, /random\(\)/],
    [{ random: () => -0.1 }, /random\(\)/],
  ])('refuses %o with a RangeError', (override, message) => {
    const options = { attempt: 1, baseDelayMs: 100, maxDelayMs: 1000, ...override };
    expect(() => backoffDelay(options)).toThrow(RangeError);
    expect(() => backoffDelay(options)).toThrow(message);
  });
});
