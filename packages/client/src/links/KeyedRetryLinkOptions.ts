import { ConfigurationError, type Random, RetryBudget, type RetryBudgetOptions } from '@idem/core';
import type { Operation, TRPCClientError } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';

/** What `retryOn` is asked about one failed attempt. */
export interface RetryOnContext<TRouter extends AnyRouter = AnyRouter> {
  op: Operation;
  error: TRPCClientError<TRouter>;
  /** The attempt that failed, counting from 1 (the first call). */
  attempt: number;
  /**
   * What the default policy decides: whether a retry may cure this failure (the same
   * reading as `isOutcomeUnknown`).
   */
  transient: boolean;
}

/** What `onRetry` is told before each backoff sleep. */
export interface RetryEvent<TRouter extends AnyRouter = AnyRouter> {
  op: Operation;
  /** The attempt that failed, counting from 1; the next one is `attempt + 1`. */
  attempt: number;
  /** How long the link waits before sending the next attempt. */
  delayMs: number;
  error: TRPCClientError<TRouter>;
}

export interface KeyedRetryLinkOptions<TRouter extends AnyRouter = AnyRouter> {
  /**
   * Attempts per call, the first one included (`1` turns retries off).
   * @default 5
   */
  maxAttempts?: number;
  /**
   * The ceiling of the first retry's delay; it doubles with every retry
   * (full jitter: each delay is drawn from [0, min(maxDelayMs, baseDelayMs · 2^retry))).
   * @default 200
   */
  baseDelayMs?: number;
  /**
   * No backoff delay is longer than this. A server's `Retry-After` may ask for more, up to
   * `maxRetryAfterMs`.
   * @default 10_000
   */
  maxDelayMs?: number;
  /**
   * The whole call, all attempts and sleeps, gets this long from its first send. A retry
   * whose sleep would end past it is not started: the call fails with the last error.
   * An attempt already in flight is bounded by `attemptTimeoutMs`, not by this, so a call
   * takes at most about `deadlineMs + attemptTimeoutMs`.
   * @default 30_000
   */
  deadlineMs?: number;
  /**
   * How long one attempt may wait for its reply. An attempt still unanswered then is
   * aborted (its request is cancelled through the terminating link, so `fetch` stops) and
   * counts as no response: its outcome is unknown, so it is retried like a lost reply (a
   * mutation with the same key), its error a `TRPCClientError` whose `cause` is a
   * `DOMException` named `TimeoutError`. Without it, a request the network swallowed
   * waits for the operating system to give up, minutes later. `false` or `Infinity` turn
   * it off; set it above the slowest procedure's normal reply time.
   * @default 10_000
   */
  attemptTimeoutMs?: number | false;
  /**
   * Replaces the default decision of which failures to retry (handed in as `transient`;
   * extend it with `({ error, transient }) => transient || …`). It cannot make an unkeyed mutation retryable, and `maxAttempts`,
   * `deadlineMs`, the budget and the caller's `signal` still apply.
   * @default ({ transient }) => transient
   */
  retryOn?: (context: RetryOnContext<TRouter>) => boolean;
  /**
   * The token bucket every retry must pay for; successes refill it. When it is empty a
   * call that fails is not retried: it fails at once, with a `TRPCClientError` whose
   * `cause` is `RetryBudgetExhaustedError` (its outcome unknown, see `isOutcomeUnknown`),
   * instead of adding load to a failing server. A retry after no response costs the
   * budget's `timeoutCost`, one after an error response its `retryCost`.
   *
   * Each `keyedRetryLink()` makes its own budget. To bound the retries of several clients
   * (say, a browser app with two tRPC clients for the same API), pass them one shared
   * `new RetryBudget(KEYED_RETRY_BUDGET)`. `false` turns the budget off.
   * @default new RetryBudget(KEYED_RETRY_BUDGET) (capacity 2,000; every retry 5; every
   * successful call refunds 5)
   */
  budget?: RetryBudget | false;
  /**
   * The longest wait a server's `Retry-After` (or idem's `retryAfterMs`) can impose. A
   * longer one is cut to this, so a wrong or hostile header cannot park a call for hours.
   * @default 30_000
   */
  maxRetryAfterMs?: number;
  /**
   * Called before each backoff sleep, e.g. for logging or metrics. A caller that aborts
   * its signal or unsubscribes here (or in `retryOn`) ends the call: no further attempt is
   * sent. @default undefined
   */
  onRetry?: (event: RetryEvent<TRouter>) => void;
  /**
   * The jitter's source of randomness, returning numbers in [0, 1). Inject
   * `seededRandom(seed)` from `@idem/core/testing` for reproducible tests.
   * @default Math.random
   */
  random?: Random;
}

/**
 * The sizing of the budget each `keyedRetryLink()` gets by default: every retry costs 5
 * tokens, whatever failed, and every successful call earns 5 back (a first-try success
 * `successRefund`, a success after retries the refund of its last retry). Retries are
 * therefore free for as long as they do not outnumber successful calls, which covers a
 * client that loses 30 % of its replies (0.43 retries per success) or even 40 %
 * (0.67); past 50 % of attempts failing the bucket drains, and once it is empty the
 * client stops retrying until calls succeed again. The 2,000 tokens are a burst of 400
 * retries for an outage (a server restart): enough for 50 calls in flight to use all
 * their attempts through a restart, twice over, so the bucket still holds tokens when the
 * server is back and refills from there.
 *
 * A lost reply of a keyed call is the cheapest retry there is (the server answers it
 * from its store), so it costs no more than any other; core's `RetryBudget` defaults
 * (capacity 500, a retry after no response 10, a success 1) are AWS's, sized for
 * unkeyed calls, and drain at a steady 30 % loss of replies.
 */
export const KEYED_RETRY_BUDGET: Readonly<RetryBudgetOptions> = Object.freeze({
  capacity: 2_000,
  retryCost: 5,
  timeoutCost: 5,
  successRefund: 5,
});

/** The rules `decideRetry` decides by: the link's options, with their defaults. */
export interface RetryPolicy<TRouter extends AnyRouter = AnyRouter> {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  maxRetryAfterMs: number;
  random: Random;
  retryOn: ((context: RetryOnContext<TRouter>) => boolean) | undefined;
  /** What `decideRetry` reads of the budget (it takes nothing; the link does). */
  budget: Pick<RetryBudget, 'available' | 'costOf'> | undefined;
}

/** Everything a keyed retry link runs by, made once when the link is made. */
export interface RetrySettings<TRouter extends AnyRouter = AnyRouter> {
  /** The factory the app called, named in errors and warnings. */
  linkName: string;
  deadlineMs: number;
  /** `Infinity` for none. */
  attemptTimeoutMs: number;
  budget: RetryBudget | undefined;
  onRetry: ((event: RetryEvent<TRouter>) => void) | undefined;
  policy: RetryPolicy<TRouter>;
}

/**
 * The options with their defaults: a `ConfigurationError` naming `linkName` for one out
 * of range, and a budget of its own (`KEYED_RETRY_BUDGET`) unless one is given.
 */
export function retrySettings<TRouter extends AnyRouter>(
  linkName: string,
  options: KeyedRetryLinkOptions<TRouter>,
): RetrySettings<TRouter> {
  const maxAttempts = options.maxAttempts ?? 5;
  const baseDelayMs = options.baseDelayMs ?? 200;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const deadlineMs = options.deadlineMs ?? 30_000;
  const attemptTimeoutMs =
    options.attemptTimeoutMs === false
      ? Number.POSITIVE_INFINITY
      : (options.attemptTimeoutMs ?? 10_000);
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
  validateOptions(linkName, {
    maxAttempts,
    baseDelayMs,
    maxDelayMs,
    deadlineMs,
    attemptTimeoutMs,
    maxRetryAfterMs,
  });
  const budget =
    options.budget === false ? undefined : (options.budget ?? new RetryBudget(KEYED_RETRY_BUDGET));
  const random = options.random ?? Math.random;
  const { retryOn, onRetry } = options;
  return {
    linkName,
    deadlineMs,
    attemptTimeoutMs,
    budget,
    onRetry,
    policy: { maxAttempts, baseDelayMs, maxDelayMs, maxRetryAfterMs, random, retryOn, budget },
  };
}

/** setTimeout fires at once for delays above 2^31 − 1 ms, so no option may exceed it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Throws a `ConfigurationError` naming `linkName` for an option out of range, when the link
 * is made rather than on its first retry.
 */
function validateOptions(
  linkName: string,
  values: {
    maxAttempts: number;
    baseDelayMs: number;
    maxDelayMs: number;
    deadlineMs: number;
    attemptTimeoutMs: number;
    maxRetryAfterMs: number;
  },
): void {
  if (!Number.isInteger(values.maxAttempts) || values.maxAttempts < 1) {
    throw new ConfigurationError(
      `${linkName}: maxAttempts must be an integer, 1 or more (1 = no retries); got ${values.maxAttempts}.`,
    );
  }
  for (const name of ['baseDelayMs', 'maxDelayMs', 'maxRetryAfterMs'] as const) {
    const value = values[name];
    if (!Number.isFinite(value) || value < 0 || value > MAX_TIMER_MS) {
      throw new ConfigurationError(
        `${linkName}: ${name} must be a number of milliseconds from 0 to ${MAX_TIMER_MS} ` +
          `(the longest timer JavaScript runs); got ${value}.`,
      );
    }
  }
  if (!(values.deadlineMs > 0)) {
    throw new ConfigurationError(
      `${linkName}: deadlineMs must be more than 0 (Infinity for no deadline); got ${values.deadlineMs}.`,
    );
  }
  const { attemptTimeoutMs } = values;
  if (
    !(attemptTimeoutMs > 0) ||
    (attemptTimeoutMs > MAX_TIMER_MS && attemptTimeoutMs !== Number.POSITIVE_INFINITY)
  ) {
    throw new ConfigurationError(
      `${linkName}: attemptTimeoutMs must be a number of milliseconds from 1 to ${MAX_TIMER_MS}, ` +
        `or false / Infinity for no per-attempt timeout; got ${attemptTimeoutMs}.`,
    );
  }
}
