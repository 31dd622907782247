import { validateKey } from '@idem/core';
import { type Operation, TRPCClientError, type TRPCLink } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { createKey } from '../createKey.js';
import { IDEMPOTENCY_KEY_CONTEXT_FIELD, idempotencyKeyOf } from '../idempotencyKeyOf.js';
import { isDevelopment } from '../isDevelopment.js';
import { keyNotSentWarning, watchKeyOnWire } from './watchKeyOnWire.js';

declare module '@trpc/client' {
  interface OperationContext {
    /**
     * The operation's idempotency key (1–255 printable ASCII characters): set by
     * `idempotencyLink` for every mutation, or by the caller through
     * `trpc: { context: { idempotencyKey } }` to tie several calls to one logical operation.
     */
    idempotencyKey?: string;
  }
}

export interface IdempotencyLinkOptions {
  /**
   * Chooses the key of a mutation that the caller gave none. Return a string to use it
   * (it must be 1–255 printable ASCII characters), or `undefined` for a random UUID.
   * Called once per call, never per retry. A key derived from the input (say
   * `checkout:${cartId}`) deduplicates even across page reloads; it must then differ for
   * every logical operation, because the server replays the first outcome for a key.
   * @default undefined (every mutation gets `crypto.randomUUID()`)
   */
  keyFor?: (op: Operation) => string | undefined;
}

/**
 * Gives every mutation an idempotency key in `op.context.idempotencyKey`, unless the
 * caller already put one there (`trpc: { context: { idempotencyKey } }`), so that the
 * server can run it once however often it is sent. Queries and subscriptions pass through
 * untouched.
 *
 * `retryingIdempotencyLink()` is this link and `keyedRetryLink` in the right order; to
 * compose the chain yourself, put it BEFORE `keyedRetryLink`:
 * `links: [idempotencyLink(), keyedRetryLink(), httpLink({ url, headers: idempotencyHeaders })]`.
 * A link runs once per call and the retry link re-sends from where it sits, so a key
 * chosen upstream of the retry link is the same on every attempt. Placed after it, this
 * link would run again on each attempt and give every retry a fresh key: each retry
 * would then be a new request to the server, the very duplicate keys exist to prevent.
 * (`keyedRetryLink` would see unkeyed mutations and, safely, not retry them at all.)
 *
 * An invalid key (empty, too long, or with characters outside printable ASCII) fails the
 * call before anything is sent, with a `TRPCClientError` whose `cause` is core's
 * `InvalidKeyError`. In development it warns once when a mutation's answer came over HTTP
 * but its key was never written into the request: give the terminating link
 * `headers: idempotencyHeaders`.
 */
export function idempotencyLink<TRouter extends AnyRouter = AnyRouter>(
  options: IdempotencyLinkOptions = {},
): TRPCLink<TRouter> {
  return keyingLinkNamed('idempotencyLink', options);
}

/**
 * `idempotencyLink`, whose warnings name `linkName`: the factory the app called
 * (`retryingIdempotencyLink` builds its keys with this).
 *
 * In development it also checks that each key reached the wire: when a keyed mutation's
 * answer came over HTTP but `idempotencyHeaders` never wrote its key into a request (the
 * terminating link was not given `headers: idempotencyHeaders`), it warns once per link.
 */
export function keyingLinkNamed<TRouter extends AnyRouter = AnyRouter>(
  linkName: string,
  options: IdempotencyLinkOptions,
): TRPCLink<TRouter> {
  const { keyFor } = options;
  let warnedNotSent = false;
  const warn = (path: string) => {
    if (warnedNotSent) return;
    warnedNotSent = true;
    console.warn(keyNotSentWarning(linkName, path));
  };
  return () =>
    ({ op, next }) => {
      if (op.type !== 'mutation') return next(op);

      let key: string;
      try {
        key = validateKey(idempotencyKeyOf(op) ?? keyFor?.(op) ?? createKey());
      } catch (error) {
        return observable((observer) => {
          observer.error(TRPCClientError.from(toError(error)));
        });
      }
      // A new context object: the caller's may be shared between calls (TanStack Query
      // reuses the `trpc.context` of a mutation's options), and writing the key into it
      // would hand the next, different call the same key.
      const result$ = next({
        ...op,
        context: { ...op.context, [IDEMPOTENCY_KEY_CONTEXT_FIELD]: key },
      });
      return warnedNotSent || !isDevelopment() ? result$ : watchKeyOnWire(result$, op, key, warn);
    };
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
