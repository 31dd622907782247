import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/** The shared retry budget is empty: retrying now would feed a retry storm. */
export class RetryBudgetExhaustedError extends IdempotencyError {
  constructor(options?: IdempotencyErrorOptions) {
    super(
      'RETRY_BUDGET_EXHAUSTED',
      'Retry budget exhausted: too many recent calls failed, so this one is not retried. ' +
        'The budget refills as calls succeed; the original error is the cause.',
      options,
    );
    this.name = 'RetryBudgetExhaustedError';
  }
}

export const isRetryBudgetExhaustedError =
  guardFor<RetryBudgetExhaustedError>('RETRY_BUDGET_EXHAUSTED');
