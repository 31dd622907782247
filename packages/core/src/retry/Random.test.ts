import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { seededRandom } from './Random.js';

describe('seededRandom', () => {
  it('repeats the same sequence for the same seed', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const first = Array.from({ length: 5 }, a);
    expect(Array.from({ length: 5 }, b)).toStrictEqual(first);
    expect(Array.from({ length: 5 }, seededRandom(43))).not.toStrictEqual(first);
  });

  it('returns numbers in [0, 1) (property)', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const random = seededRandom(seed);
        for (let i = 0; i < 100; i++) {
          const value = random();
          expect(value).toBeGreaterThanOrEqual(0);
          expect(value).toBeLessThan(1);
        }
      }),
    );
  });

  it('spreads values over [0, 1)', () => {
    const random = seededRandom(7);
    const buckets = new Array<number>(10).fill(0);
    for (let i = 0; i < 10_000; i++) {
      const bucket = Math.floor(random() * 10);
      buckets[bucket] = (buckets[bucket] ?? 0) + 1;
    }
    for (const count of buckets) expect(count).toBeGreaterThan(800);
  });

  it('refuses a non-finite seed', () => {
    expect(() => seededRandom(Number.NaN)).toThrow(RangeError);
    expect(() => seededRandom(Number.POSITIVE_INFINITY)).toThrow(/finite/);
  });
});
