import type { TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { idempotencyKeyOf } from '../idempotencyKeyOf.js';
import { isDevelopment } from '../isDevelopment.js';
import { type KeyedRetryLinkOptions, retrySettings } from './KeyedRetryLinkOptions.js';
import { startRetryingCall } from './retryingCall.js';

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
  const settings = retrySettings(linkName, options);
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
      return observable((observer) => startRetryingCall({ op, next, observer, settings }));
    };
}
