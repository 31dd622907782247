import { backoffDelay, RetryBudgetExhaustedError, type RetryKind } from '@idem/core';
import { type Operation, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { classifyError } from '../classifyError.js';
import type { RetryPolicy } from './KeyedRetryLinkOptions.js';

/** One failed attempt of a call, and where the call stands. */
export interface FailedAttempt<TRouter extends AnyRouter = AnyRouter> {
  op: Operation;
  error: TRPCClientError<TRouter>;
  /** The attempt that failed, counting from 1. */
  attempt: number;
  /** The time of the decision, and the call's deadline, in ms since the epoch. */
  now: number;
  deadlineAt: number;
}

/** What a retry takes from the budget: a retry after no response is a `'timeout'`. */
export interface BudgetCharge {
  retryKind: RetryKind;
  cost: number;
}

/** Why a call is not retried. */
export type FailReason =
  /** The caller's signal aborted: the error is the abort itself. */
  | 'aborted'
  /** The failure is not transient, or `retryOn` said no. */
  | 'not-retryable'
  /** `retryOn` threw: the call fails with what it threw. */
  | 'retry-on-threw'
  /** The attempt was the last of `maxAttempts`. */
  | 'max-attempts'
  /** The sleep before the next attempt would end past `deadlineMs`. */
  | 'deadline';

/**
 * What the link does after a failed attempt. `fail` and `budget-exhausted` end the call
 * with `error`; `retry` takes `charge` from the budget (none without one) and sends the
 * next attempt after `delayMs`.
 */
export type RetryDecision<TRouter extends AnyRouter = AnyRouter> =
  | { kind: 'retry'; delayMs: number; charge: BudgetCharge | undefined }
  | { kind: 'fail'; reason: FailReason; error: TRPCClientError<TRouter> }
  | { kind: 'budget-exhausted'; charge: BudgetCharge; error: TRPCClientError<TRouter> };

/**
 * Whether and when to retry a failed attempt: a pure decision (it reads the budget and
 * draws from `random`, but takes nothing and sets no timer), checked in this order: the
 * caller aborted; the failure is not retryable (`retryOn`, by default its `transient`
 * reading); the attempts are used up; the wait (full-jitter backoff, floored by the
 * server's `Retry-After` up to `maxRetryAfterMs`) would end past the deadline; the budget
 * cannot pay for the retry.
 */
export function decideRetry<TRouter extends AnyRouter>(
  failed: FailedAttempt<TRouter>,
  policy: RetryPolicy<TRouter>,
): RetryDecision<TRouter> {
  const { op, error, attempt, now, deadlineAt } = failed;
  const fail = (reason: FailReason) => ({ kind: 'fail', reason, error }) as const;
  if (op.signal?.aborted) return fail('aborted');

  const failure = classifyError(error, now);
  let retryable: boolean;
  try {
    retryable = policy.retryOn
      ? policy.retryOn({ op, error, attempt, transient: failure.transient })
      : failure.transient;
  } catch (thrown) {
    return { kind: 'fail', reason: 'retry-on-threw', error: toClientError(thrown) };
  }
  if (!retryable) return fail('not-retryable');
  if (attempt >= policy.maxAttempts) return fail('max-attempts');

  const delayMs = nextWait(attempt, failure.retryAfterMs, policy);
  if (now + delayMs > deadlineAt) return fail('deadline');

  const { budget } = policy;
  if (!budget) return { kind: 'retry', delayMs, charge: undefined };
  const retryKind = failure.outcome === 'no-response' ? 'timeout' : 'retry';
  const charge = { retryKind, cost: budget.costOf(retryKind) } as const;
  if (charge.cost > budget.available) {
    return { kind: 'budget-exhausted', charge, error: budgetExhaustedError(error) };
  }
  return { kind: 'retry', delayMs, charge };
}

/**
 * The wait before the attempt after `attempt`: backoff with full jitter and a cap, or the
 * server's `Retry-After` (cut to `maxRetryAfterMs`) if that is longer.
 */
function nextWait(
  attempt: number,
  retryAfterMs: number | undefined,
  policy: RetryPolicy<AnyRouter>,
): number {
  const { baseDelayMs, maxDelayMs, random } = policy;
  const backoffMs = backoffDelay({ attempt: attempt - 1, baseDelayMs, maxDelayMs, random });
  const floorMs = Math.min(retryAfterMs ?? 0, policy.maxRetryAfterMs);
  return Math.max(backoffMs, floorMs);
}

/**
 * The error of a call the budget refused to retry: its outcome unknown, its cause a
 * `RetryBudgetExhaustedError` wrapping `last`, and `last`'s shape kept.
 */
function budgetExhaustedError<TRouter extends AnyRouter>(
  last: TRPCClientError<TRouter>,
): TRPCClientError<TRouter> {
  const exhausted = new RetryBudgetExhaustedError({ cause: last });
  return new TRPCClientError<TRouter>(
    `${exhausted.message} The call's outcome is unknown (isOutcomeUnknown(error) ` +
      'is true): it may have run; retry it later with the same idempotency key.',
    {
      cause: exhausted,
      // Keep the server's error shape, so code that reads `error.data.code`
      // still sees why the call failed; `cause` says why it was not retried.
      result: last.shape ? { id: null, error: last.shape } : null,
      ...(last.meta ? { meta: last.meta } : {}),
    },
  );
}

/** `thrown` as the `TRPCClientError` a link fails with (itself if it already is one). */
export function toClientError<TRouter extends AnyRouter>(
  thrown: unknown,
): TRPCClientError<TRouter> {
  return thrown instanceof TRPCClientError
    ? thrown
    : TRPCClientError.from(thrown instanceof Error ? thrown : new Error(String(thrown)));
}
