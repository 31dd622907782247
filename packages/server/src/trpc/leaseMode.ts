import { type HandlerContext, type Idempotency, isLeaseLostError, wasReplayed } from '@idem/core';
import { getTRPCErrorFromUnknown } from '@trpc/server';
import type { Answer, ResultLike } from './transactionMode.js';

/**
 * Lease mode: core's engine (`createIdempotency`), with tRPC's `next` as the handler. The
 * claim commits first (one statement), the procedure runs under a heartbeat-renewed lease,
 * and the completion is fenced (one statement); a replay is the claim alone, which finds
 * the completed record in the same read-only statement.
 */
export async function leaseMode<TResult extends ResultLike>(
  engine: Idempotency,
  request: { scope: string; key: string; fingerprint: string },
  next: (idempotency: HandlerContext) => Promise<TResult>,
): Promise<Answer<TResult>> {
  let ran: TResult | undefined;
  try {
    const outcome = await engine.execute(request, async (context) => {
      const result = await next(context);
      ran = result;
      if (result.ok) return result.data;
      // A step that found its lease gone threw LeaseLostError, which tRPC wrapped: hand the
      // engine the original, so that it writes nothing and reports the lost lease.
      const cause = result.error.cause;
      throw isLeaseLostError(cause) && cause.key === request.key ? cause : result.error;
    });
    if (!outcome.replayed) return { result: ran!, replayed: false };
    return { result: { ok: true, data: outcome.value }, replayed: true };
  } catch (error) {
    // A stored error, thrown again by the engine's replay: the answer, not a failure.
    if (!wasReplayed(error)) throw error;
    return { result: { ok: false, error: getTRPCErrorFromUnknown(error) }, replayed: true };
  }
}
