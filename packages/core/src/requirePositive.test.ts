import { describe, expect, it } from 'vitest';
import { isConfigurationError } from './errors/index.js';
import { requirePositive } from './requirePositive.js';

describe('requirePositive', () => {
  it('returns a valid value unchanged', () => {
    expect(requirePositive('leaseMs', 30_000, { unit: 'milliseconds' })).toBe(30_000);
    expect(requirePositive('ratio', 0.5)).toBe(0.5);
    expect(requirePositive('batchSize', 7, { integer: true })).toBe(7);
  });

  it.each([
    [0, {}, 'leaseMs must be a positive number; got 0.'],
    [-1, { unit: 'milliseconds' }, 'leaseMs must be a positive number of milliseconds; got -1.'],
    [Number.NaN, {}, 'leaseMs must be a positive number; got NaN.'],
    [Number.POSITIVE_INFINITY, {}, 'leaseMs must be a positive number; got Infinity.'],
    [1.5, { integer: true }, 'leaseMs must be a positive integer; got 1.5.'],
    ['5' as unknown as number, {}, 'leaseMs must be a positive number; got "5".'],
  ])('refuses %s with one wording', (value, options, message) => {
    let thrown: unknown;
    try {
      requirePositive('leaseMs', value, options);
    } catch (error) {
      thrown = error;
    }
    expect(isConfigurationError(thrown)).toBe(true);
    expect((thrown as Error).message).toBe(message);
  });
});
