import { describe, expect, it } from 'vitest';
import { median, percentile, slope, summarize } from './stats.js';

describe('percentile', () => {
  const hundred = Array.from({ length: 100 }, (_, index) => index + 1);

  it('is nearest-rank', () => {
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile(hundred, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
  });

  it('answers NaN for no data and the minimum for p0', () => {
    expect(percentile([], 50)).toBeNaN();
    expect(percentile(hundred, 0)).toBe(1);
  });
});

describe('summarize', () => {
  it('sorts numerically, not as strings', () => {
    const summary = summarize([10, 9, 100, 1]);
    expect(summary).toEqual({ count: 4, mean: 30, p50: 9, p99: 100, max: 100 });
  });

  it('handles an empty sample', () => {
    expect(summarize([]).count).toBe(0);
    expect(summarize([]).p99).toBeNaN();
  });
});

describe('median', () => {
  it('takes the middle value, or the mean of the middle two', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});

describe('slope', () => {
  it('is the least-squares trend per step', () => {
    expect(slope([1, 2, 3, 4])).toBe(1);
    expect(slope([5, 5, 5])).toBe(0);
    expect(slope([10, 0, 10, 0, 10])).toBe(0);
    expect(slope([7])).toBe(0);
  });
});
