import { type HandlerContext, type Idempotency, isLeaseLostError, wasReplayed } from '@idem/core';
import { getTRPCErrorFromUnknown } from '@trpc/server';
import type { CallOutcome, ProcedureResult } from './transactionMode.js';

/**
 * Lease mode: core's engine (`createIdempotency`), with tRPC's `next` as the handler. The
 * claim commits first (one statement), the procedure runs under a heartbeat-renewed lease,
 * and the completion is fenced (one statement); a replay is the claim alone, which finds
 * the completed record in the same read-only statement.
 */
export async function leaseMode<TResult extends ProcedureResult>(
  engine: Idempotency,
  request: { scope: string; key: string; fingerprint: string },
  next: (idempotency: HandlerContext) => Promise<TResult>,
): Promise<CallOutcome<TResult>> {
  let ran: TResult | undefined;
  try {
    const outcome = await engine.execute(request, async (context) => {
      const result = await next(context);
      ran = result;
      if (result.ok) return result.data;
      // A procedure that lost its lease fails with whatever its code made of the aborted
      // signal: the LeaseLostError itself (a step, `signal.throwIfAborted()`), wrapped by
      // tRPC, or an AbortError (`setTimeout(ms, v, { signal })`, fetch). Either way hand the
      // engine the LeaseLostError, so that it writes nothing and answers 409 LEASE_LOST.
      const cause = result.error.cause;
      if (isLeaseLostError(cause) && cause.key === request.key) throw cause;
      const reason: unknown = context.signal.aborted ? context.signal.reason : undefined;
      if (isLeaseLostError(reason)) throw reason;
      throw result.error;
    });
    if (!outcome.replayed) return { result: ran!, replayed: false };
    return { result: { ok: true, data: outcome.value }, replayed: true };
  } catch (error) {
    // A stored error, thrown again by the engine's replay: the answer, not a failure.
    if (!wasReplayed(error)) throw error;
    return { result: { ok: false, error: getTRPCErrorFromUnknown(error) }, replayed: true };
  }
}
