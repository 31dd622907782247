import { isLeaseLostError } from '@idem/core';
import type { KeyedContext } from './createKeyedRunner.js';

/**
 * The failure a handler's error stands for. A handler that lost its lease fails with
 * whatever its code made of the aborted signal: the `LeaseLostError` itself (a step,
 * `signal.throwIfAborted()`), wrapped (tRPC wraps a procedure's errors), or an
 * `AbortError` (a timer or fetch given the signal). Either way the engine must see the
 * `LeaseLostError`, so that it writes nothing and the answer is 409 `LEASE_LOST`.
 */
export function failureOf(error: unknown, context: KeyedContext): unknown {
  if (isLeaseLostError(error)) return error;
  const cause: unknown = (error as { cause?: unknown } | null)?.cause;
  if (isLeaseLostError(cause) && cause.key === context.key) return cause;
  const reason: unknown = context.signal.aborted ? context.signal.reason : undefined;
  return isLeaseLostError(reason) ? reason : error;
}
