import type { TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { type IdempotencyLinkOptions, keyingLinkNamed } from './idempotencyLink.js';
import type { KeyedRetryLinkOptions } from './KeyedRetryLinkOptions.js';
import { retryLinkNamed } from './keyedRetryLink.js';

/** `idempotencyLink`'s `keyFor` and every option of `keyedRetryLink`, with their defaults. */
export interface RetryingIdempotencyLinkOptions<TRouter extends AnyRouter = AnyRouter>
  extends IdempotencyLinkOptions,
    KeyedRetryLinkOptions<TRouter> {}

/**
 * Gives every mutation an idempotency key and retries transient failures with that same
 * key: `idempotencyLink` and `keyedRetryLink` in one link, already in the only order
 * that works (the key is chosen once per call, upstream of the retries, so every attempt
 * repeats it). Queries are retried too, without a key; subscriptions pass through.
 *
 * Put it before the terminating link, and give that link `headers: idempotencyHeaders`
 * so the key goes on the wire (in development, a mutation whose answer came over HTTP
 * without its key in the request prints one warning saying so):
 *
 * @example
 * createTRPCClient<AppRouter>({
 *   links: [
 *     retryingIdempotencyLink(),
 *     httpBatchLink({ url, headers: idempotencyHeaders }),
 *   ],
 * });
 *
 * A chain that needs other links between the two (a logger that should see every
 * attempt, say) composes `idempotencyLink()` and `keyedRetryLink()` itself.
 */
export function retryingIdempotencyLink<TRouter extends AnyRouter = AnyRouter>(
  options: RetryingIdempotencyLinkOptions<TRouter> = {},
): TRPCLink<TRouter> {
  const { keyFor, ...retryOptions } = options;
  const keying = keyingLinkNamed<TRouter>(
    'retryingIdempotencyLink',
    keyFor === undefined ? {} : { keyFor },
  );
  // Made once here, not per client, so the link's retry budget is shared by every client
  // built with this link, as with keyedRetryLink().
  const retrying = retryLinkNamed<TRouter>('retryingIdempotencyLink', retryOptions);
  return (runtime) => {
    const keyOperation = keying(runtime);
    const retryOperation = retrying(runtime);
    return ({ op, next }) =>
      keyOperation({ op, next: (keyedOp) => retryOperation({ op: keyedOp, next }) });
  };
}
