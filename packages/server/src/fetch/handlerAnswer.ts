import type { Attempt, ErrorDecision, ErrorPolicy } from '@idem/core';
import { isLeaseLostError } from '@idem/core';
import type { KeyedContext } from '../adapter/createKeyedRunner.js';
import { failureOf } from '../adapter/failureOf.js';
import { thrownErrorResponse } from './problemResponse.js';
import { nullBodyStatus, storeResponse } from './storedResponse.js';

/**
 * Runs the handler and judges what it came to, for the engine: a response (read whole, so
 * that it can be stored and still sent) kept as the policy says, or a failure that releases
 * the key. A thrown error the error policy stores becomes a problem response, stored.
 */
export function handlerAnswer(policies: {
  errorPolicy: ErrorPolicy;
  responsePolicy: (response: Response) => ErrorDecision;
  replayHeaders: readonly string[];
}) {
  const { errorPolicy, responsePolicy } = policies;
  const replaySet = new Set(policies.replayHeaders.map((name) => name.toLowerCase()));
  return async (
    invoke: () => Response | Promise<Response>,
    idempotency: KeyedContext,
  ): Promise<Attempt<Response>> => {
    let response: Response;
    try {
      response = await invoke();
    } catch (error) {
      const failure = failureOf(error, idempotency);
      if (isLeaseLostError(failure) || errorPolicy.classify(failure) === 'release') {
        return { ok: false, error: failure };
      }
      response = thrownErrorResponse(error);
    }
    let read: Awaited<ReturnType<typeof storeResponse>>;
    try {
      read = await storeResponse(response, replaySet);
    } catch (error) {
      // The handler's response body failed (a stream that errored, a body already used):
      // the handler's failure, thrown on; the key is released.
      return { ok: false, error };
    }
    const { bytes, stored } = read;
    const value = new Response(nullBodyStatus(response.status) ? null : (bytes as BodyInit), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // A stored refusal (4xx) answers every retry, but what the handler wrote before refusing
    // is undone in transaction mode, as a thrown error would undo it.
    const keep =
      responsePolicy(value) === 'release' ? 'nothing' : value.status < 400 ? 'all' : 'answer';
    return { ok: true, value, stored, keep };
  };
}
