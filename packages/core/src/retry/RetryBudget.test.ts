import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { thrown } from '../../test/thrown.js';
import { isConfigurationError } from '../errors/ConfigurationError.js';
import { RetryBudget } from './RetryBudget.js';

describe('RetryBudget', () => {
  it('starts full with the AWS-like defaults', () => {
    const budget = new RetryBudget();
    expect(budget.available).toBe(500);
    expect(budget).toMatchObject({
      capacity: 500,
      retryCost: 5,
      timeoutCost: 10,
      successRefund: 1,
    });
    expect(budget.costOf('retry')).toBe(5);
    expect(budget.costOf('timeout')).toBe(10);
  });

  it('runs dry after capacity / cost retries and then takes nothing', () => {
    const budget = new RetryBudget();
    let granted = 0;
    while (budget.tryAcquire('retry')) granted++;
    expect(granted).toBe(100);
    expect(budget.available).toBe(0);
    expect(budget.tryAcquire('retry')).toBe(false);
    expect(budget.available).toBe(0);
  });

  it('refuses a timeout retry that costs more than what is left, without taking it', () => {
    const budget = new RetryBudget({ capacity: 15 });
    expect(budget.tryAcquire('timeout')).toBe(true);
    expect(budget.available).toBe(5);
    expect(budget.tryAcquire('timeout')).toBe(false);
    expect(budget.available).toBe(5);
    expect(budget.tryAcquire('retry')).toBe(true);
    expect(budget.available).toBe(0);
  });

  it('refills by successRefund per plain success and by the cost of a successful retry', () => {
    const budget = new RetryBudget({ capacity: 20 });
    while (budget.tryAcquire('retry')) {}
    expect(budget.available).toBe(0);
    for (let i = 0; i < 4; i++) budget.recordSuccess();
    expect(budget.tryAcquire('retry')).toBe(false);
    budget.recordSuccess();
    expect(budget.available).toBe(5);
    expect(budget.tryAcquire('retry')).toBe(true);
    budget.recordSuccess(budget.costOf('retry'));
    expect(budget.available).toBe(5);
  });

  it('never grows past capacity', () => {
    const budget = new RetryBudget({ capacity: 10 });
    budget.recordSuccess();
    budget.recordSuccess(100);
    expect(budget.available).toBe(10);
  });

  it('keeps 0 ≤ available ≤ capacity under any sequence of calls (property)', () => {
    const operation = fc.oneof(
      fc.constant({ op: 'retry' as const }),
      fc.constant({ op: 'timeout' as const }),
      fc.constant({ op: 'success' as const }),
      fc.record({ op: fc.constant('refund' as const), cost: fc.nat({ max: 20 }) }),
    );
    fc.assert(
      fc.property(fc.array(operation, { maxLength: 300 }), (operations) => {
        const budget = new RetryBudget({ capacity: 50 });
        for (const operation of operations) {
          const before = budget.available;
          if (operation.op === 'retry' || operation.op === 'timeout') {
            const granted = budget.tryAcquire(operation.op);
            const cost = budget.costOf(operation.op);
            expect(budget.available).toBe(granted ? before - cost : before);
            expect(granted).toBe(before >= cost);
          } else if (operation.op === 'success') {
            budget.recordSuccess();
          } else {
            budget.recordSuccess(operation.cost);
          }
          expect(budget.available).toBeGreaterThanOrEqual(0);
          expect(budget.available).toBeLessThanOrEqual(50);
        }
      }),
    );
  });

  it('bounds sustained retries to about one per retryCost / successRefund successes', () => {
    const budget = new RetryBudget();
    while (budget.tryAcquire('retry')) {}
    let retries = 0;
    for (let call = 0; call < 1000; call++) {
      budget.recordSuccess();
      if (budget.tryAcquire('retry')) retries++;
    }
    expect(retries).toBe(200);
  });

  it.each([
    [{ capacity: -1 }, /capacity must be a finite number, 0 or more; got -1/],
    [{ capacity: Number.NaN }, /capacity/],
    [{ retryCost: Number.POSITIVE_INFINITY }, /retryCost/],
    [{ timeoutCost: -5 }, /timeoutCost/],
    [{ successRefund: -1 }, /successRefund/],
  ])('refuses %o with a RangeError', (options, message) => {
    expect(() => new RetryBudget(options)).toThrow(RangeError);
    expect(() => new RetryBudget(options)).toThrow(message);
  });

  it('refuses a cost larger than the capacity with a ConfigurationError', () => {
    const error = thrown(() => new RetryBudget({ capacity: 8 }));
    expect(isConfigurationError(error)).toBe(true);
    expect((error as Error).message).toMatch(/timeoutCost \(10\) is larger than capacity \(8\)/);
  });

  it('refuses a negative or non-finite refund', () => {
    const budget = new RetryBudget();
    expect(() => budget.recordSuccess(-1)).toThrow(RangeError);
    expect(() => budget.recordSuccess(Number.NaN)).toThrow(/acquiredCost/);
  });
});
