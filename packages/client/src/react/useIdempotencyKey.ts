import { useCallback, useState } from 'react';
import { createKey } from '../links/internals/createKey.js';

export interface IdempotencyKeyState {
  /** The key of the current logical submit; stable across re-renders and repeated clicks. */
  key: string;
  /** Starts a new logical submit: the next render has a fresh key. */
  reset: () => void;
}

/**
 * One idempotency key per logical submit of a form or button, for TanStack Query
 * mutations through `@trpc/tanstack-react-query`.
 *
 * The key lives in React state, so it survives re-renders, and a double click (two
 * `mutate` calls before anything re-renders) sends the same key twice: the server runs
 * the work once and answers both with the same result. Call `reset()` when the submit is
 * over: after success, and after a definitive error (a 4xx the user must fix first, since
 * the edited request needs a new key). Keep the key after a transient failure that
 * outlasted the link's retries, so the user's "try again" cannot run the work twice.
 *
 * @example
 * const { key, reset } = useIdempotencyKey();
 * const placeOrder = useMutation(
 *   trpc.order.place.mutationOptions({
 *     trpc: { context: { idempotencyKey: key } },
 *     retry: false, // keyedRetryLink retries; TanStack retrying too would multiply attempts
 *     onSuccess: () => reset(),
 *     onError: (error) => {
 *       if (!isTransientError(error)) reset();
 *     },
 *   }),
 * );
 */
export function useIdempotencyKey(): IdempotencyKeyState {
  const [key, setKey] = useState(createKey);
  const reset = useCallback(() => setKey(createKey()), []);
  return { key, reset };
}
