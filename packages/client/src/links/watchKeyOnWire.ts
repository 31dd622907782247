import type { Operation, OperationResultObservable } from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import { observable } from '@trpc/server/observable';
import { wasKeySent } from '../keysOnWire.js';

/**
 * Whether a link's result (its `context`) or error (its `meta`) came from an HTTP
 * response: httpLink and httpBatchLink put the `Response` there; other terminating links
 * (a local or test link, a WebSocket) do not.
 */
function cameOverHttp(meta: unknown): boolean {
  if (typeof meta !== 'object' || meta === null || !('response' in meta)) return false;
  return typeof meta.response === 'object' && meta.response !== null;
}

/**
 * `result$` as it is, plus a check when its first answer arrives: if that answer came over
 * HTTP and `idempotencyHeaders` never wrote `key` into a request, the key did not reach the
 * server, and `warn` is called with the operation (development only; the caller decides).
 */
export function watchKeyOnWire<TRouter extends AnyRouter>(
  result$: OperationResultObservable<TRouter, unknown>,
  op: Pick<Operation, 'path'>,
  key: string,
  warn: (path: string) => void,
): OperationResultObservable<TRouter, unknown> {
  let checked = false;
  const check = (meta: unknown) => {
    if (checked) return;
    checked = true;
    if (cameOverHttp(meta) && !wasKeySent(key)) warn(op.path);
  };
  return observable((observer) => {
    const subscription = result$.subscribe({
      next(result) {
        check(result.context);
        observer.next(result);
      },
      error(error) {
        check(typeof error === 'object' && error !== null ? error.meta : undefined);
        observer.error(error);
      },
      complete() {
        observer.complete();
      },
    });
    return () => subscription.unsubscribe();
  });
}

/** The development warning for a mutation whose key never reached the server. */
export function keyNotSentWarning(linkName: string, path: string): string {
  return (
    `[idem] ${linkName}: mutation "${path}" went to the server without its idempotency key: ` +
    'the terminating link did not put it in the request headers, so the server cannot tell ' +
    'a retry from a new call (and answers 400 where a key is required). Give the terminating ' +
    'link `headers: idempotencyHeaders`, e.g. httpBatchLink({ url, headers: ' +
    'idempotencyHeaders }), or `headers: idempotencyHeaders.with(yourHeaders)` to keep ' +
    'headers of your own. (Shown once.)'
  );
}
