import { useCallback, useMemo, useState, useSyncExternalStore } from 'react';
import { createKey } from '../createKey.js';
import { type IntentKeyOptions, intentKey } from '../intentKey.js';

export interface IdempotencyKeyState {
  /** The key of the current logical submit; stable across re-renders and repeated clicks. */
  key: string;
  /** Starts a new logical submit: the next render has a fresh key. */
  reset: () => void;
}

export interface IntentKeyState {
  /**
   * The intent's persisted key. `undefined` while rendering on the server and during
   * hydration (Web Storage exists only in the browser): keep the submit button disabled
   * until it is set.
   */
  key: string | undefined;
  /** The intent settled (success, a definitive error): forget its key, in every tab. */
  reset: () => void;
}

/**
 * One idempotency key per logical submit of a form or button, for TanStack Query
 * mutations through `@trpc/tanstack-react-query`.
 *
 * Without options the key lives in React state, so it survives re-renders, and a double
 * click (two `mutate` calls before anything re-renders) sends the same key twice: the
 * server runs the work once and answers both with the same result. Call `reset()` when the
 * submit is over: after success, and after a definitive error (a 4xx the user must fix
 * first, since the edited request needs a new key). Keep the key after a transient failure
 * that outlasted the link's retries, so the user's "try again" cannot run the work twice.
 *
 * With `{ intent }` the key is bound to that intent and kept in Web Storage (see
 * `intentKey`), so a reload, Back or a second tab on the same intent sends the same key;
 * `reset()` settles the intent. Nothing touches storage while rendering on the server. A
 * `storage` object or `clock` is best created once (at module level): each new one
 * re-subscribes the component.
 *
 * @example
 * const { key, reset } = useIdempotencyKey();
 * const placeOrder = useMutation(
 *   trpc.order.place.mutationOptions({
 *     trpc: { context: { idempotencyKey: key } },
 *     retry: false, // keyedRetryLink retries; TanStack retrying too would multiply attempts
 *     onSuccess: () => reset(),
 *     onError: (error) => {
 *       if (!isOutcomeUnknown(error)) reset();
 *     },
 *   }),
 * );
 */
export function useIdempotencyKey(): IdempotencyKeyState;
export function useIdempotencyKey(options: IntentKeyOptions): IntentKeyState;
export function useIdempotencyKey(
  options?: IntentKeyOptions,
): IdempotencyKeyState | IntentKeyState {
  const [localKey, setLocalKey] = useState(createKey);
  const intent = options?.intent;
  const storage = options?.storage;
  const ttlMs = options?.ttlMs;
  const clock = options?.clock;
  const bound = useMemo(
    () => (intent === undefined ? undefined : intentKey({ intent, storage, ttlMs, clock })),
    [intent, storage, ttlMs, clock],
  );
  const subscribe = useCallback(
    (listener: () => void) => (bound ? bound.subscribe(listener) : () => {}),
    [bound],
  );
  // Creating the key on first read is safe to repeat: later reads return the stored one.
  const persisted = useSyncExternalStore(
    subscribe,
    useCallback(() => bound?.get(), [bound]),
    () => undefined,
  );
  const reset = useCallback(() => {
    if (bound) bound.settle();
    else setLocalKey(createKey());
  }, [bound]);
  return { key: bound ? persisted : localKey, reset };
}
