import { isRetryBudgetExhaustedError, RetryBudget } from '@idem/core';
import { type Operation, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { describe, expect, it, vi } from 'vitest';
import { httpError, networkError } from '../../test/scriptedLink.js';
import { isOutcomeUnknown } from '../isOutcomeUnknown.js';
import { decideRetry, type FailedAttempt } from './decideRetry.js';
import type { RetryPolicy } from './KeyedRetryLinkOptions.js';

// decideRetry alone: no link, no timers, no clock; each test states the time it decides at.

const NOW = Date.parse('2026-01-01T00:00:00.000Z'); // whole seconds, as HTTP dates have

function op(signal: AbortSignal | null = null): Operation {
  return { id: 1, type: 'query', path: 'stock.get', input: undefined, context: {}, signal };
}

function failed(
  error: TRPCClientError<AnyRouter>,
  overrides: Partial<FailedAttempt> = {},
): FailedAttempt {
  return { op: op(), error, attempt: 1, now: NOW, deadlineAt: NOW + 30_000, ...overrides };
}

function policy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  return {
    maxAttempts: 5,
    baseDelayMs: 200,
    maxDelayMs: 10_000,
    maxRetryAfterMs: 30_000,
    random: () => 0.5,
    retryOn: undefined,
    budget: undefined,
    ...overrides,
  };
}

const unavailable = () => httpError({ status: 503 });

describe('decideRetry: whether to retry', () => {
  it('retries a transient failure: no response, 408, busy 409, 425, 429, 5xx', () => {
    const busy = httpError({ status: 409, idempotency: { code: 'REQUEST_IN_PROGRESS' } });
    for (const error of [
      networkError(),
      busy,
      ...[408, 425, 429, 500, 502, 503, 504].map((status) => httpError({ status })),
    ]) {
      expect(decideRetry(failed(error), policy()).kind).toBe('retry');
    }
  });

  it('fails with the attempt’s own error when the failure is not transient', () => {
    for (const status of [400, 401, 403, 404, 409, 422]) {
      const error = httpError({ status });
      expect(decideRetry(failed(error), policy())).toEqual({
        kind: 'fail',
        reason: 'not-retryable',
        error,
      });
    }
  });

  it('the caller aborted: fails with the abort, before asking retryOn', () => {
    const retryOn = vi.fn(() => true);
    const error = unavailable();
    const decision = decideRetry(
      failed(error, { op: op(AbortSignal.abort()) }),
      policy({ retryOn }),
    );
    expect(decision).toEqual({ kind: 'fail', reason: 'aborted', error });
    expect(retryOn).not.toHaveBeenCalled();
  });

  it('retryOn replaces the decision, told the op, the error, the attempt and `transient`', () => {
    const retryOn = vi.fn(({ transient }: { transient: boolean }) => !transient);
    const refused = httpError({ status: 400 });
    const attempt = failed(refused, { attempt: 2 });
    expect(decideRetry(attempt, policy({ retryOn })).kind).toBe('retry');
    expect(retryOn).toHaveBeenCalledWith({
      op: attempt.op,
      error: refused,
      attempt: 2,
      transient: false,
    });
    expect(decideRetry(failed(unavailable()), policy({ retryOn }))).toMatchObject({
      kind: 'fail',
      reason: 'not-retryable',
    });
  });

  it('a throwing retryOn fails the call with what it threw, as a TRPCClientError', () => {
    const broke = new Error('retryOn broke');
    const decision = decideRetry(
      failed(unavailable()),
      policy({
        retryOn: () => {
          throw broke;
        },
      }),
    );
    expect(decision).toMatchObject({ kind: 'fail', reason: 'retry-on-threw' });
    if (decision.kind !== 'fail') return;
    expect(decision.error).toBeInstanceOf(TRPCClientError);
    expect(decision.error.message).toBe('retryOn broke');
    expect(decision.error.cause).toBe(broke);

    const thrownClientError = httpError({ status: 418 });
    const passedOn = decideRetry(
      failed(unavailable()),
      policy({
        retryOn: () => {
          throw thrownClientError;
        },
      }),
    );
    expect(passedOn).toMatchObject({ kind: 'fail', error: thrownClientError });

    const thrownString = decideRetry(
      failed(unavailable()),
      policy({
        retryOn: () => {
          throw 'no';
        },
      }),
    );
    expect(thrownString.kind === 'fail' && thrownString.error.message).toBe('no');
  });

  it('the attempt that used up maxAttempts fails with its error; the one before retries', () => {
    const error = unavailable();
    expect(decideRetry(failed(error, { attempt: 3 }), policy({ maxAttempts: 3 }))).toEqual({
      kind: 'fail',
      reason: 'max-attempts',
      error,
    });
    expect(decideRetry(failed(error, { attempt: 2 }), policy({ maxAttempts: 3 })).kind).toBe(
      'retry',
    );
    expect(decideRetry(failed(error), policy({ maxAttempts: 1 }))).toMatchObject({
      reason: 'max-attempts',
    });
  });

  it('draws no jitter for a call it does not retry', () => {
    const random = vi.fn(() => 0.5);
    decideRetry(failed(httpError({ status: 404 })), policy({ random }));
    decideRetry(failed(unavailable(), { attempt: 5 }), policy({ random }));
    expect(random).not.toHaveBeenCalled();
  });
});

describe('decideRetry: how long to wait', () => {
  it('full jitter: a draw from [0, min(maxDelayMs, baseDelayMs · 2^retry))', () => {
    const delay = (attempt: number, draw: number, overrides: Partial<RetryPolicy> = {}) => {
      const decision = decideRetry(
        failed(unavailable(), { attempt, deadlineAt: Number.POSITIVE_INFINITY }),
        policy({ random: () => draw, maxAttempts: 100, ...overrides }),
      );
      return decision.kind === 'retry' ? decision.delayMs : undefined;
    };
    expect(delay(1, 0.5)).toBe(100); // first retry: [0, 200)
    expect(delay(2, 0.5)).toBe(200); // [0, 400)
    expect(delay(4, 0.25)).toBe(400); // [0, 1 600)
    expect(delay(3, 0)).toBe(0);
    expect(delay(20, 0.5)).toBe(5_000); // capped: [0, 10 000)
    expect(delay(20, 0.5, { maxDelayMs: 1_000 })).toBe(500);
  });

  it('Retry-After is a floor over the backoff, cut to maxRetryAfterMs', () => {
    const delay = (headers: Record<string, string>, overrides: Partial<RetryPolicy> = {}) => {
      const decision = decideRetry(
        failed(httpError({ status: 503, headers }), { deadlineAt: Number.POSITIVE_INFINITY }),
        policy({ random: () => 0, ...overrides }),
      );
      return decision.kind === 'retry' ? decision.delayMs : undefined;
    };
    expect(delay({ 'Retry-After': '3' })).toBe(3_000);
    expect(delay({ 'Retry-After': '999999' })).toBe(30_000);
    expect(delay({ 'Retry-After': '999999' }, { maxRetryAfterMs: 5_000 })).toBe(5_000);
    // An HTTP date is read against the decision's `now`, not the clock.
    expect(delay({ 'Retry-After': new Date(NOW + 5_000).toUTCString() })).toBe(5_000);
    // A backoff above the floor wins.
    expect(delay({ 'Retry-After': '1' }, { random: () => 0.5, baseDelayMs: 4_000 })).toBe(2_000);
  });

  it('prefers idem’s retryAfterMs over the whole-second header', () => {
    const error = httpError({
      status: 409,
      idempotency: { code: 'REQUEST_IN_PROGRESS', retryAfterMs: 1_250 },
      headers: { 'Retry-After': '2', 'Idempotency-Status': 'in-progress' },
    });
    expect(decideRetry(failed(error), policy({ random: () => 0 }))).toMatchObject({
      kind: 'retry',
      delayMs: 1_250,
    });
  });

  it('fails when the wait would end past the deadline; ending on it is still in time', () => {
    const error = httpError({ status: 503, headers: { 'Retry-After': '5' } });
    const at = (deadlineAt: number) =>
      decideRetry(failed(error, { deadlineAt }), policy({ random: () => 0 }));
    expect(at(NOW + 4_999)).toEqual({ kind: 'fail', reason: 'deadline', error });
    expect(at(NOW + 5_000)).toMatchObject({ kind: 'retry', delayMs: 5_000 });
  });
});

describe('decideRetry: the budget', () => {
  it('charges a retry after no response as a timeout, after an error response as a retry', () => {
    const budget = new RetryBudget({ capacity: 100, retryCost: 5, timeoutCost: 10 });
    expect(decideRetry(failed(networkError()), policy({ budget }))).toEqual({
      kind: 'retry',
      delayMs: 100,
      charge: { retryKind: 'timeout', cost: 10 },
    });
    expect(decideRetry(failed(unavailable()), policy({ budget }))).toMatchObject({
      charge: { retryKind: 'retry', cost: 5 },
    });
    // It reads the budget and takes nothing: the link pays when it retries.
    expect(budget.available).toBe(100);
  });

  it('without a budget, a retry costs nothing', () => {
    expect(decideRetry(failed(networkError()), policy())).toEqual({
      kind: 'retry',
      delayMs: 100,
      charge: undefined,
    });
  });

  it('a budget that cannot pay: budget-exhausted, an outcome-unknown error keeping the shape', () => {
    const budget = new RetryBudget({ capacity: 10, retryCost: 5, timeoutCost: 10 });
    budget.tryAcquire('retry');
    const last = unavailable();
    const decision = decideRetry(failed(networkError()), policy({ budget }));
    expect(decision).toMatchObject({
      kind: 'budget-exhausted',
      charge: { retryKind: 'timeout', cost: 10 },
    });
    expect(decideRetry(failed(last), policy({ budget })).kind).toBe('retry'); // 5 of 5 left

    budget.tryAcquire('retry');
    const refused = decideRetry(failed(last), policy({ budget }));
    if (refused.kind !== 'budget-exhausted') return expect.unreachable(refused.kind);
    const { error } = refused;
    expect(error).toBeInstanceOf(TRPCClientError);
    expect(isRetryBudgetExhaustedError(error.cause)).toBe(true);
    expect(error.cause?.cause).toBe(last);
    expect(error.message).toMatch(/Retry budget exhausted.*outcome is unknown/);
    expect(error.data?.httpStatus).toBe(503);
    expect(isOutcomeUnknown(error)).toBe(true);
  });

  it('the deadline is checked before the budget', () => {
    const budget = new RetryBudget({ capacity: 5, retryCost: 5, timeoutCost: 5 });
    budget.tryAcquire('retry');
    const decision = decideRetry(failed(unavailable(), { deadlineAt: NOW }), policy({ budget }));
    expect(decision).toMatchObject({ kind: 'fail', reason: 'deadline' });
  });
});
