import { backoffDelay, RetryBudget, RetryBudgetExhaustedError } from '@idem/core';
import { TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable, type Unsubscribable } from '@trpc/server/observable';
import { classifyError } from '../classifyError.js';
import { idempotencyKeyOf } from '../idempotencyKeyOf.js';
import { isDevelopment } from '../isDevelopment.js';
import {
  KEYED_RETRY_BUDGET,
  type KeyedRetryLinkOptions,
  validateOptions,
} from './KeyedRetryLinkOptions.js';

/**
 * Retries failed tRPC calls that are safe to send again: every query, and every mutation
 * that carries an idempotency key (`op.context.idempotencyKey`, set by `idempotencyLink`,
 * which must come before this link). A mutation without a key is never retried: if its
 * reply was lost, it may already have run, and sending it again could run it twice.
 * `retryingIdempotencyLink()` is both links in one, in that order.
 *
 * Only transient failures are retried: no response (network error; the outcome is
 * unknown), 408, idem's 409 "key busy" (in progress, or lease lost to a takeover), 425,
 * 429, 500, 502, 503 and 504. The
 * wait is exponential backoff with full jitter and a cap; a `Retry-After` from the server
 * (seconds or an HTTP date) is a floor, bounded by `maxRetryAfterMs`. A shared retry
 * budget stops retry storms, `attemptTimeoutMs` bounds each attempt (a timed-out attempt
 * is a lost reply), `deadlineMs` bounds the whole call, and aborting the call's
 * `signal` or unsubscribing ends a pending sleep at once. Subscriptions pass through.
 *
 * @example
 * createTRPCClient<AppRouter>({
 *   links: [
 *     idempotencyLink(),
 *     keyedRetryLink({ maxAttempts: 5 }),
 *     httpBatchLink({ url, headers: idempotencyHeaders }),
 *   ],
 * });
 */
export function keyedRetryLink<TRouter extends AnyRouter = AnyRouter>(
  options: KeyedRetryLinkOptions<TRouter> = {},
): TRPCLink<TRouter> {
  return retryLinkNamed('keyedRetryLink', options);
}

/**
 * `keyedRetryLink`, whose errors and warnings name `linkName`: the factory the app called
 * (`retryingIdempotencyLink` builds its retries with this).
 */
export function retryLinkNamed<TRouter extends AnyRouter = AnyRouter>(
  linkName: string,
  options: KeyedRetryLinkOptions<TRouter>,
): TRPCLink<TRouter> {
  const maxAttempts = options.maxAttempts ?? 5;
  const baseDelayMs = options.baseDelayMs ?? 200;
  const maxDelayMs = options.maxDelayMs ?? 10_000;
  const deadlineMs = options.deadlineMs ?? 30_000;
  const attemptTimeoutMs =
    options.attemptTimeoutMs === false
      ? Number.POSITIVE_INFINITY
      : (options.attemptTimeoutMs ?? 10_000);
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
  const random = options.random ?? Math.random;
  const { retryOn, onRetry } = options;
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
  let warnedUnkeyed = false;

  return () =>
    ({ op, next }) => {
      if (op.type === 'subscription') return next(op);
      const key = idempotencyKeyOf(op);
      if (op.type === 'mutation' && (key === undefined || key === null)) {
        if (!warnedUnkeyed && isDevelopment()) {
          warnedUnkeyed = true;
          console.warn(
            `[idem] ${linkName}: mutation "${op.path}" has no idempotency key, so it is ` +
              'never retried: if its reply were lost it might already have run, and sending it ' +
              'again could run it twice. Use retryingIdempotencyLink() (keys and retries in one ' +
              'link), put idempotencyLink() before keyedRetryLink() in the links, or pass ' +
              'trpc: { context: { idempotencyKey } }. (Shown once.)',
          );
        }
        return next(op);
      }

      return observable((observer) => {
        const deadlineAt = Date.now() + deadlineMs;
        let attempt = 0;
        let inFlight: Unsubscribable | undefined;
        let timer: ReturnType<typeof setTimeout> | undefined;
        let attemptTimer: ReturnType<typeof setTimeout> | undefined;
        let stopListeningForAbort: (() => void) | undefined;
        let lastRetryCost: number | undefined;
        let succeeded = false;

        const fail = (error: unknown) => {
          observer.error(
            error instanceof TRPCClientError
              ? error
              : TRPCClientError.from(error instanceof Error ? error : new Error(String(error))),
          );
        };

        const stopAttemptTimer = () => {
          clearTimeout(attemptTimer);
          attemptTimer = undefined;
        };

        const send = () => {
          attempt += 1;
          let answered = false;
          // Set when this attempt timed out: tRPC's observables still deliver what a
          // cancelled request reports (httpLink's AbortError), which must not count.
          let abandoned = false;
          const attemptSubscription = next(op).subscribe({
            next(envelope) {
              if (abandoned) return;
              answered = true;
              stopAttemptTimer();
              if (!succeeded) {
                succeeded = true;
                // A success after retries refunds the last retry's cost in full (as in the
                // AWS SDKs' standard mode); one without retries adds `successRefund`.
                budget?.recordSuccess(lastRetryCost);
              }
              observer.next(envelope);
            },
            error: (error) => {
              if (abandoned) return;
              answered = true;
              stopAttemptTimer();
              onAttemptFailed(error);
            },
            complete: () => {
              if (abandoned) return;
              stopAttemptTimer();
              observer.complete();
            },
          });
          inFlight = attemptSubscription;
          // A terminating link may answer synchronously, before the timer would be set.
          if (answered || !Number.isFinite(attemptTimeoutMs)) return;
          attemptTimer = setTimeout(() => {
            attemptTimer = undefined;
            abandoned = true;
            // Unsubscribing cancels the request (httpLink aborts its fetch).
            attemptSubscription.unsubscribe();
            onAttemptFailed(
              TRPCClientError.from(
                new DOMException(
                  `${linkName}: no reply within attemptTimeoutMs (${attemptTimeoutMs} ms); ` +
                    'the attempt was aborted and its outcome is unknown.',
                  'TimeoutError',
                ),
              ),
            );
          }, attemptTimeoutMs);
        };

        const onAttemptFailed = (error: TRPCClientError<TRouter>) => {
          // The caller gave up: this error is the abort itself, not something to retry.
          if (op.signal?.aborted) return observer.error(error);

          const failure = classifyError(error);
          let retry: boolean;
          try {
            retry = retryOn
              ? retryOn({ op, error, attempt, transient: failure.transient })
              : failure.transient;
          } catch (thrown) {
            return fail(thrown);
          }
          if (!retry || attempt >= maxAttempts) return observer.error(error);

          const backoffMs = backoffDelay({ attempt: attempt - 1, baseDelayMs, maxDelayMs, random });
          const floorMs = Math.min(failure.retryAfterMs ?? 0, maxRetryAfterMs);
          const delayMs = Math.max(backoffMs, floorMs);
          if (Date.now() + delayMs > deadlineAt) return observer.error(error);

          if (budget) {
            const kind = failure.outcome === 'no-response' ? 'timeout' : 'retry';
            if (!budget.tryAcquire(kind)) {
              const exhausted = new RetryBudgetExhaustedError({ cause: error });
              return observer.error(
                new TRPCClientError<TRouter>(
                  `${exhausted.message} The call's outcome is unknown (isOutcomeUnknown(error) ` +
                    'is true): it may have run; retry it later with the same idempotency key.',
                  {
                    cause: exhausted,
                    // Keep the server's error shape, so code that reads `error.data.code`
                    // still sees why the call failed; `cause` says why it was not retried.
                    result: error.shape ? { id: null, error: error.shape } : null,
                    ...(error.meta ? { meta: error.meta } : {}),
                  },
                ),
              );
            }
            lastRetryCost = budget.costOf(kind);
          }

          try {
            onRetry?.({ op, attempt, delayMs, error });
          } catch (thrown) {
            return fail(thrown);
          }
          sleepThenSend(delayMs);
        };

        const sleepThenSend = (delayMs: number) => {
          const signal = op.signal;
          const onAbort = () => {
            clearTimeout(timer);
            timer = undefined;
            stopListeningForAbort = undefined;
            fail(signal?.reason ?? new DOMException('This operation was aborted', 'AbortError'));
          };
          signal?.addEventListener('abort', onAbort, { once: true });
          stopListeningForAbort = () => signal?.removeEventListener('abort', onAbort);
          timer = setTimeout(() => {
            timer = undefined;
            stopListeningForAbort?.();
            stopListeningForAbort = undefined;
            send();
          }, delayMs);
        };

        send();

        return () => {
          clearTimeout(timer);
          stopAttemptTimer();
          stopListeningForAbort?.();
          inFlight?.unsubscribe();
        };
      });
    };
}
